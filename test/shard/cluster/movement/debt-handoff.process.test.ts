// Debt travels with the hand-off (issue 29 item 6): on real nodes, keys of every algorithm
// charged past their limit change owner twice, by a join (3 → 4 members) and by a graceful
// leave (SIGTERM, 4 → 3), and keep their debt exactly on each new owner; a refund after each
// move is paid back once, and a charge after it is not lost by the next move.
import t from "tap";
import { metric, startCluster, waitForRing, type TestCluster } from "../../../harness/cluster.js";
import { clearOfWindowEnd } from "../../../harness/contract.js";
import { closeAgents } from "../../../harness/http-client.js";
import type { NodeProcess } from "../../../harness/node-process.js";
import { eventually } from "../../../harness/wait.js";
import { DEBT_ALGORITHMS, chargeIntoDebt, debtKey, expectCharge, expectRefundOnce, expectStillInDebt, YEAR } from "../../../harness/debt.js";

t.teardown(closeAgents);

/** An identifier node `before` owns while node 3 is away, and node 3 owns once it is back. */
function movingTo3(cluster: TestCluster, before: number, prefix: string): string {
  const without3 = cluster.members.slice(0, 3);
  for (let i = 0; ; i++) {
    const id = `${prefix}-${i}`;
    if (cluster.ownerOf("test", id, without3) === before && cluster.ownerOf("test", id) === 3) return id;
  }
}

t.test("a join and a graceful leave move debt whole to each new owner; a refund after each is paid back once", async (t) => {
  await clearOfWindowEnd(YEAR, 300_000);
  const cluster = await startCluster(4, { LOG_LEVEL: "info" });
  t.teardown(() => cluster.stop());
  // Node 3 leaves first, so that its return is a join (3 → 4) that takes the keys over.
  cluster.nodes[3]!.signal("SIGTERM");
  await cluster.nodes[3]!.exited;
  const [a, b, c] = cluster.nodes as NodeProcess[];
  await waitForRing([a!, b!, c!], 3);

  const run = Date.now().toString(36);
  const keys = DEBT_ALGORITHMS.flatMap((algorithm) => [0, 1].map((before) => debtKey(algorithm, movingTo3(cluster, before, `move-${run}-${algorithm}`))));
  // Charged through node 2, which owns none of them: each charge is forwarded to its owner.
  for (const key of keys) await chargeIntoDebt(t, c!, key);

  // Join: node 3 comes back; nodes 0 and 1 hand it the keys.
  const joiner = await cluster.restart(3);
  await waitForRing(cluster.nodes as NodeProcess[], 4);
  // Bounds a wait, it is no speed claim: the hand-off runs when each member sees the joiner.
  t.ok(await eventually(async () => ((await metric(joiner, "ringlimit_stored_keys")) ?? 0) >= keys.length, 20_000), "the joiner received the keys");
  for (const key of keys) await expectStillInDebt(t, joiner, key, "after the join, on the new owner");
  for (const key of keys) await expectStillInDebt(t, a!, key, "after the join, through node 0");
  for (const key of keys) await expectRefundOnce(t, c!, key, key.count - 900, "after the join");
  // Back into debt before the next move: the debt the leave must carry was charged on the joiner.
  for (const key of keys) {
    const r = await expectCharge(t, b!, key, 1500 - key.count, "back into debt");
    key.retryAt = r.json.timestamp + Math.round(r.json.data.retry_after * 1000);
  }

  // Leave: the joiner is SIGTERMed and hands every key back.
  joiner.signal("SIGTERM");
  t.same(await joiner.exited, { code: 0, signal: null }, "SIGTERM: exit code 0");
  t.match(joiner.output(), new RegExp(`"handedOver":${keys.length},"notHandedOver":0`), `the leaver handed over its ${keys.length} keys`);
  await waitForRing([a!, b!, c!], 3);
  for (const key of keys) await expectStillInDebt(t, a!, key, "after the leave, through node 0");
  for (const key of keys) await expectStillInDebt(t, c!, key, "after the leave, through node 2");
  for (const key of keys) await expectRefundOnce(t, b!, key, key.count - 900, "after the leave");
});

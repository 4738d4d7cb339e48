// Debt travels with replicas (issue 29 item 6): on three real nodes with REPLICAS=2, keys of
// every algorithm charged past their limit on their owner keep their debt exactly when the
// owner is SIGKILLed and a replica is promoted, and a refund made after that is paid back
// once, and stays paid back when its new owner is SIGKILLed in turn.
import t, { type Test } from "tap";
import { metric, startCluster, waitForRing, type TestCluster } from "../../../harness/cluster.js";
import { clearOfWindowEnd } from "../../../harness/contract.js";
import { closeAgents } from "../../../harness/http-client.js";
import type { NodeProcess } from "../../../harness/node-process.js";
import { eventually } from "../../../harness/wait.js";
import { DEBT_ALGORITHMS, chargeIntoDebt, debtKey, expectCountNext, expectRefundOnce, expectStillInDebt, YEAR, type DebtKey } from "../../../harness/debt.js";

t.teardown(closeAgents);

/** Until every change on `nodes` is held by its replicas (ringlimit_replication_backlog_states 0 on each). */
async function replicated(t: Test, nodes: readonly NodeProcess[]): Promise<void> {
  const caughtUp = async () => (await Promise.all(nodes.map((n) => metric(n, "ringlimit_replication_backlog_states")))).every((v) => v === 0);
  t.ok(await eventually(caughtUp, 20_000), "replication caught up: no backlog on any node");
}

/** An identifier node 0 owns on the full ring, and node `next` once node 0 is gone. */
function ownedBy0Then(cluster: TestCluster, next: number, prefix: string): string {
  const rest = cluster.members.filter((_, i) => i !== 0);
  for (let i = 0; ; i++) {
    const id = `${prefix}-${i}`;
    if (cluster.ownerOf("test", id) === 0 && cluster.ownerOf("test", id, rest) === next) return id;
  }
}

t.test("REPLICAS=2: debt survives the owner's SIGKILL, a refund after it is paid once and survives the next SIGKILL", async (t) => {
  await clearOfWindowEnd(YEAR, 300_000);
  const cluster = await startCluster(3, { REPLICAS: "2" });
  t.teardown(() => cluster.stop());
  const [a, b, c] = cluster.nodes as NodeProcess[];
  const run = Date.now().toString(36);
  // Every key moves to node 1 when node 0 dies, so node 1's SIGKILL later is an event for each.
  const keys: DebtKey[] = DEBT_ALGORITHMS.map((algorithm) => debtKey(algorithm, ownedBy0Then(cluster, 1, `debt-${run}-${algorithm}`)));
  for (const key of keys) await chargeIntoDebt(t, a!, key);
  await replicated(t, [a!, b!, c!]);

  a!.signal("SIGKILL");
  await a!.exited;
  await waitForRing([b!, c!], 2);
  for (const key of keys) await expectStillInDebt(t, c!, key, "promoted replica, through the other node");
  for (const key of keys) await expectStillInDebt(t, b!, key, "promoted replica, on itself");
  t.ok(((await metric(b!, "ringlimit_replicas_promoted_total")) ?? 0) >= keys.length, "node 1 promoted its replicas");

  for (const key of keys) await expectRefundOnce(t, c!, key, key.count - 900, "after the promotion");
  await replicated(t, [b!, c!]);

  // The refund was made on node 1 and replicated to node 2, which held a copy counting the
  // debt: node 2 promoted must count what node 1 counted after the refund, not the debt.
  b!.signal("SIGKILL");
  await b!.exited;
  await waitForRing([c!], 1);
  for (const key of keys) await expectCountNext(t, c!, key, "refunded, then its owner SIGKILLed");
});

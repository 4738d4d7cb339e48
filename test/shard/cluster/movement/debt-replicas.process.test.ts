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
import { freePort } from "../../../harness/ports.js";
import { TEST_KEY } from "../../../harness/http-client.js";
import { counterIdentifier, entriesKey } from "../../../../src/rls/counter-id.js";
import { rlsClient, type Message } from "../../../rls/rls-client.js";
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

/**
 * Envoy's two calls on a ring (docs/envoy.md, Token budgets): a charge (hits_addend the tokens)
 * past the budget on its owner, then its SIGKILL: the promoted replica answers the next check
 * (hits 0) OVER_LIMIT on both survivors, a refund (is_negative_hits) pays it back once, and the
 * next SIGKILL keeps it paid back.
 */
t.test("RLS, REPLICAS=2: a charge past the budget blocks the checks after the owner's SIGKILL; a refund after it holds through the next", async (t) => {
  await clearOfWindowEnd(86_400, 300_000);
  const grpcPorts = [await freePort(), await freePort(), await freePort()];
  const cluster = await startCluster(3, { REPLICAS: "2" }, (i) => ({ GRPC_PORT: String(grpcPorts[i]) }));
  t.teardown(() => cluster.stop());
  const clients = grpcPorts.map((p) => rlsClient(`127.0.0.1:${p}`, { key: TEST_KEY }));
  t.teardown(() => clients.forEach((c) => c.close()));
  const [a, b, c] = cluster.nodes as NodeProcess[];
  const rest = cluster.members.slice(1);
  let user = "";
  for (let i = 0; user === ""; i++) {
    const id = counterIdentifier(entriesKey([{ key: "user", value: `rls-${i}` }]));
    if (cluster.ownerOf("ai", id) === 0 && cluster.ownerOf("ai", id, rest) === 1) user = `rls-${i}`;
  }
  const call = (hits: number, negative = false) => ({
    domain: "ai",
    descriptors: [
      {
        entries: [{ key: "user", value: user }],
        limit: { requests_per_unit: 1000, unit: "DAY" },
        hits_addend: { value: hits },
        ...(negative ? { is_negative_hits: true } : {}),
      },
    ],
  });
  const remaining = (m: Message) => Number(m.statuses[0].limit_remaining ?? 0);

  const charged = await clients[0]!.shouldRateLimit(call(1500));
  t.equal(charged.overall_code, "OVER_LIMIT", "a charge of 1,500 on a budget of 1,000, on its owner: counted, over");
  await replicated(t, [a!, b!, c!]);
  a!.signal("SIGKILL");
  await a!.exited;
  await waitForRing([b!, c!], 2);
  for (const i of [1, 2])
    t.equal((await clients[i]!.shouldRateLimit(call(0))).overall_code, "OVER_LIMIT", `the check through node ${i}, after the owner's SIGKILL`);

  const refund = await clients[2]!.shouldRateLimit(call(600, true));
  t.same([refund.overall_code, remaining(refund)], ["OK", 100], "a refund of 600 after the promotion: 900 counted, paid back once");
  // Node 2 may remember the owner's OVER_LIMIT until the refund's notice reaches it (a bound on a wait, no speed claim).
  for (const i of [1, 2]) {
    t.ok(await eventually(async () => (await clients[i]!.shouldRateLimit(call(0))).overall_code === "OK", 10_000), `the check through node ${i} passes again`);
    t.equal(remaining(await clients[i]!.shouldRateLimit(call(0))), 100, `node ${i}: 100 left`);
  }
  await replicated(t, [b!, c!]);
  b!.signal("SIGKILL");
  await b!.exited;
  await waitForRing([c!], 1);
  const last = await clients[2]!.shouldRateLimit(call(0));
  t.same([last.overall_code, remaining(last)], ["OK", 100], "the last node holds the refund: 100 left, not the debt");
});

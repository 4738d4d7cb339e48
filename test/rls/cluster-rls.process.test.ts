/**
 * RLS on a ring of real node processes: three nodes count one descriptor exactly, whichever
 * node Envoy asks; an owner that cannot answer gives OK and a degraded count, or UNAVAILABLE
 * with FAIL_OPEN=false; all-or-nothing across owners.
 */
import t, { type Test } from "tap";
import { counterIdentifier, entriesKey } from "../../src/rls/counter-id.js";
import { metric, startCluster, type TestCluster } from "../harness/cluster.js";
import { freePort } from "../harness/ports.js";
import { TEST_KEY } from "../harness/http-client.js";
import { grpcCode, rlsClient, type RlsClient } from "./rls-client.js";

const UNAVAILABLE = 14;

async function grpcCluster(t: Test, n: number, env: Record<string, string>): Promise<{ cluster: TestCluster; clients: RlsClient[] }> {
  const grpcPorts: number[] = [];
  for (let i = 0; i < n; i++) grpcPorts.push(await freePort());
  const cluster = await startCluster(n, env, (i) => ({ GRPC_PORT: String(grpcPorts[i]) }));
  t.teardown(() => cluster.stop());
  const clients = grpcPorts.map((p) => rlsClient(`127.0.0.1:${p}`, { key: TEST_KEY }));
  t.teardown(() => clients.forEach((c) => c.close()));
  return { cluster, clients };
}

/** A descriptor with its own daily limit (the day's end is far from any test run's seconds). */
const descriptor = (value: string, perDay: number) => ({ entries: [{ key: "user", value }], limit: { requests_per_unit: perDay, unit: "DAY" } });

/** A user value whose counter is owned by node `index`. */
function ownedBy(cluster: TestCluster, index: number, domain: string, prefix: string): string {
  for (let i = 0; ; i++) {
    const value = `${prefix}-${i}`;
    if (cluster.ownerOf(domain, counterIdentifier(entriesKey([{ key: "user", value }]))) === index) return value;
  }
}

t.test("three nodes count one descriptor exactly, whichever node is asked", async (t) => {
  // No answer may depend on a deadline: forwards wait as long as they need.
  const { cluster, clients } = await grpcCluster(t, 3, { PEER_TIMEOUT_MS: "30000", REPLICAS: "1" });
  const value = ownedBy(cluster, 2, "edge", "exact");
  const limit = 45;
  const calls: Promise<{ overall_code: string; statuses: { limit_remaining?: number }[] }>[] = [];
  for (let i = 0; i < limit + 9; i++) calls.push(clients[i % 3]!.shouldRateLimit({ domain: "edge", descriptors: [descriptor(value, limit)] }));
  const answers = await Promise.all(calls);
  const ok = answers.filter((a) => a.overall_code === "OK").length;
  t.equal(ok, limit, "exactly the limit passed, asked concurrently through three nodes");
  t.equal(answers.length - ok, 9, "the rest were over");
  const remaining = answers.filter((a) => a.overall_code === "OK").map((a) => a.statuses[0]!.limit_remaining ?? 0);
  t.same(
    remaining.sort((a, b) => a - b),
    Array.from({ length: limit }, (_, i) => i),
    "each remaining value from 44 down to 0 exactly once",
  );
  const peek = await clients[0]!.shouldRateLimit({ domain: "edge", descriptors: [{ ...descriptor(value, limit), hits_addend: { value: 0 } }] });
  t.equal(peek.statuses[0].code, "OVER_LIMIT", "a peek through another node sees the full count");
});

t.test("an owner that cannot answer: OK and counted as degraded, or UNAVAILABLE with FAIL_OPEN=false", async (t) => {
  // The stopped owner stays on the ring (long FAILURE_TIMEOUT_MS): every forward to it times out.
  const env = { PEER_TIMEOUT_MS: "200", FAILURE_TIMEOUT_MS: "60000", REPLICAS: "1" };
  for (const failOpen of [true, false]) {
    t.test(`FAIL_OPEN=${failOpen}`, async (t) => {
      const { cluster, clients } = await grpcCluster(t, 2, { ...env, FAIL_OPEN: String(failOpen) });
      const value = ownedBy(cluster, 1, "edge", "stopped");
      const mine = ownedBy(cluster, 0, "edge", "local");
      const before = (await metric(cluster.nodes[0]!, "ringlimit_degraded_total", '{reason="peer_timeout"}')) ?? 0;
      cluster.nodes[1]!.signal("SIGSTOP");
      t.teardown(() => cluster.nodes[1]!.signal("SIGCONT"));
      const req = { domain: "edge", descriptors: [descriptor(mine, 5), descriptor(value, 5)] };
      if (failOpen) {
        const res = await clients[0]!.shouldRateLimit(req);
        t.equal(res.overall_code, "OK");
        t.equal(res.statuses[1].code, "OK", "the unreachable owner's descriptor is let through");
        t.equal(res.statuses[0].limit_remaining, 4, "the reachable one is counted as usual");
        const after = await metric(cluster.nodes[0]!, "ringlimit_degraded_total", '{reason="peer_timeout"}');
        t.equal(after, before + 1, "and the fail-open answer is counted");
      } else {
        const err = await grpcCode(clients[0]!.shouldRateLimit(req));
        t.equal(err?.code, UNAVAILABLE, "UNAVAILABLE, so Envoy's failure_mode_deny decides");
      }
    });
  }
});

t.test("RLS_ALL_OR_NOTHING: descriptors on two owners are counted together or not at all", async (t) => {
  const { cluster, clients } = await grpcCluster(t, 2, { PEER_TIMEOUT_MS: "30000", REPLICAS: "1", RLS_ALL_OR_NOTHING: "true" });
  const a = ownedBy(cluster, 0, "edge", "aon-a");
  const b = ownedBy(cluster, 1, "edge", "aon-b");
  const both = { domain: "edge", descriptors: [descriptor(a, 10), descriptor(b, 2)] };
  const codes: string[] = [];
  for (let i = 0; i < 3; i++) codes.push((await clients[i % 2]!.shouldRateLimit(both)).overall_code);
  t.same(codes, ["OK", "OK", "OVER_LIMIT"]);
  const alone = await clients[1]!.shouldRateLimit({ domain: "edge", descriptors: [descriptor(a, 10)] });
  t.equal(alone.statuses[0].limit_remaining, 7, "the refused request counted nothing on a's owner (10 - 2 - this one)");
});

/**
 * Fail-open as a caller sees it, with a real fault and no mocks: in a two-node cluster the
 * owner of a key is frozen (SIGSTOP), so the other node cannot get a decision in time.
 * With FAIL_OPEN (default) the answer is the fail-open body of docs/api.md; with FAIL_OPEN=false
 * it is an enveloped 503. The failure detector is set slow (5 s) so the fault lasts.
 */
import t from "tap";
import { closeAgents } from "../harness/http-client.js";
import { hit, metric, startCluster, type TestCluster } from "../harness/cluster.js";
import type { NodeProcess } from "../harness/node-process.js";
import { envelopeProblems, leakProblems } from "../harness/contract.js";

t.teardown(closeAgents);

const SLOW_DETECTOR = { FAILURE_TIMEOUT_MS: "5000", HEARTBEAT_INTERVAL_MS: "100", PEER_TIMEOUT_MS: "100" };

async function frozenOwner(
  t: { teardown(fn: () => unknown): void },
  env: Record<string, string>,
): Promise<{ cluster: TestCluster; front: NodeProcess; id: string }> {
  const cluster = await startCluster(2, { ...SLOW_DETECTOR, ...env });
  t.teardown(async () => {
    cluster.nodes[1]?.signal("SIGCONT");
    await cluster.stop();
  });
  const id = cluster.identifierOwnedBy(1, `frozen-${process.pid}`);
  cluster.nodes[1]!.signal("SIGSTOP");
  return { cluster, front: cluster.nodes[0]!, id };
}

t.test("FAIL_OPEN=true: 200, degraded, count 1, remaining limit − 1, reset_time now + duration, counted in a metric", async (t) => {
  const { front, id } = await frozenOwner(t, {});
  const before = (await metric(front, "ringlimit_degraded_total", '{reason="peer_timeout"}')) ?? 0;
  const started = Date.now();
  const replies = [];
  for (let i = 0; i < 4; i++) replies.push(await hit(front, id, 7, { algorithm: "sliding-window" }));
  t.ok(Date.now() - started < 4000, "still inside the detector's window");
  for (const r of replies) {
    t.equal(r.status, 200, `fail-open answer (${r.text.slice(0, 200)})`);
    t.same(envelopeProblems(r, "rate_limit"), []);
    const d = r.json.data;
    t.equal(d.allowed, true);
    t.equal(d.degraded, true, "data.degraded = true");
    t.equal(d.count, 1, "count 1: a fail-open answer knows no state");
    t.equal(d.remaining, 6, "remaining = limit − 1");
    t.equal(d.count + d.remaining, d.limit);
    t.equal(d.reset_time, Math.ceil((r.json.timestamp + 3600_000) / 1000), "reset_time = now + duration");
    t.equal(d.namespace, "test");
    t.equal(d.identifier, id);
    t.equal(d.algorithm, "sliding-window");
    t.equal(d._request.success, true);
    t.ok(d._request.processing_time_ms >= 90, `waited for the peer deadline (${d._request.processing_time_ms} ms)`);
    t.equal(r.headers["ratelimit-policy"], '"sliding-window";q=7;w=3600');
    t.equal(r.headers["ratelimit"], `"sliding-window";r=6;t=${d.reset_time - Math.floor(r.json.timestamp / 1000)}`);
  }
  const after = (await metric(front, "ringlimit_degraded_total", '{reason="peer_timeout"}')) ?? 0;
  t.equal(after - before, 4, "ringlimit_degraded_total{reason=peer_timeout} counted each one");
});

t.test("FAIL_OPEN=false: an unreachable owner is an enveloped 503", async (t) => {
  const { cluster, front, id } = await frozenOwner(t, { FAIL_OPEN: "false" });
  const r = await hit(front, id, 7);
  t.equal(r.status, 503, r.text.slice(0, 200));
  t.same(envelopeProblems(r, "error"), []);
  t.equal(r.json.data.error, "Service Unavailable");
  t.equal(r.json.data.status, 503);
  t.same(leakProblems(r.text), []);
  t.notOk("degraded" in r.json.data);
  // keys the healthy node owns itself are decided as usual
  const own = await hit(front, cluster.identifierOwnedBy(0, `own-${process.pid}`), 7);
  t.equal(own.status, 200, "a key the healthy node owns is decided");
  t.notOk(own.json.data.degraded);
  t.equal(own.json.data.count, 1);
});

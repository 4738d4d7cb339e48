/**
 * ringlimit_namespace_requests_total{namespace, outcome} (src/metrics/namespace-outcomes.ts),
 * read from real nodes' /metrics after real requests: allowed and blocked by effective
 * namespace, the first METRICS_MAX_NAMESPACES namespaces labelled and the rest as `other`,
 * nothing counted for refused requests, and degraded answers from a real fault (an owner
 * frozen with SIGSTOP), failed open or, with FAIL_OPEN=false, refused with 503.
 */
import t from "tap";
import { hit, startCluster } from "../harness/cluster.js";
import { closeAgents, limit, request } from "../harness/http-client.js";
import { startTestNode } from "../harness/in-process-node.js";

t.teardown(closeAgents);

/** Every sample of the metric, as "namespace outcome" → value. */
async function outcomes(url: string): Promise<Record<string, number>> {
  const text = (await request(url + "/metrics")).text;
  const found: Record<string, number> = {};
  for (const m of text.matchAll(/^ringlimit_namespace_requests_total\{namespace="([^"]*)",outcome="([^"]*)"\} (\S+)$/gm)) {
    found[`${m[1]} ${m[2]}`] = Number(m[3]);
  }
  return found;
}

t.test("allowed and blocked per namespace; past METRICS_MAX_NAMESPACES, other", async (t) => {
  const node = await startTestNode({ METRICS_MAX_NAMESPACES: "2" });
  t.teardown(() => node.stop());
  const body = (namespace: string, extra: Record<string, unknown> = {}) => ({ namespace, identifier: "u1", limit: 1, duration: 60, ...extra });
  const statuses = [];
  statuses.push((await limit(node.url, body("alpha"))).status); // alpha: the first slot
  statuses.push((await limit(node.url, body("alpha"))).status);
  statuses.push((await limit(node.url, body("beta", { product: "Mobile App", limit: 5 }))).status); // beta.mobile-app: the second
  statuses.push((await limit(node.url, body("gamma"))).status); // no slot left: other
  statuses.push((await limit(node.url, body("gamma"))).status);
  statuses.push((await limit(node.url, body("other", { identifier: "u2" }))).status); // literally "other": the same series
  statuses.push((await limit(node.url, body("alpha", { identifier: "u3" }))).status);
  t.same(statuses, [200, 429, 200, 200, 429, 200, 200]);
  // Refused before a decision: nothing counted for their namespaces.
  t.equal((await limit(node.url, body("delta", { limit: 0 }))).status, 400);
  t.equal((await limit(node.url, body("delta"), { authorization: "Bearer nope" })).status, 401);
  t.same(await outcomes(node.url), {
    "alpha allowed": 2,
    "alpha blocked": 1,
    "beta.mobile-app allowed": 1,
    "other allowed": 2,
    "other blocked": 1,
  });
});

t.test("METRICS_MAX_NAMESPACES=0: every namespace is other", async (t) => {
  const node = await startTestNode({ METRICS_MAX_NAMESPACES: "0" });
  t.teardown(() => node.stop());
  for (const namespace of ["a", "b", "c"]) await limit(node.url, { namespace, identifier: "u", limit: 5, duration: 60 });
  t.same(await outcomes(node.url), { "other allowed": 3 });
});

t.test("a frozen owner: degraded, failed open or refused with FAIL_OPEN=false", async (t) => {
  const slowDetector = { FAILURE_TIMEOUT_MS: "5000", HEARTBEAT_INTERVAL_MS: "100", PEER_TIMEOUT_MS: "100" };
  const [open, closed] = await Promise.all([startCluster(2, slowDetector), startCluster(2, { ...slowDetector, FAIL_OPEN: "false" })]);
  t.teardown(async () => {
    for (const c of [open, closed]) c.nodes[1]?.signal("SIGCONT");
    await Promise.all([open.stop(), closed.stop()]);
  });
  const statuses: Record<string, number[]> = { open: [], closed: [] };
  for (const [name, cluster] of [
    ["open", open],
    ["closed", closed],
  ] as const) {
    const own = cluster.identifierOwnedBy(0, `own-${process.pid}`);
    const away = cluster.identifierOwnedBy(1, `away-${process.pid}`);
    statuses[name]!.push((await hit(cluster.nodes[0]!, own)).status);
    cluster.nodes[1]!.signal("SIGSTOP");
    for (let i = 0; i < 3; i++) statuses[name]!.push((await hit(cluster.nodes[0]!, away)).status);
  }
  t.same(statuses, { open: [200, 200, 200, 200], closed: [200, 503, 503, 503] });
  // hit() sends namespace "test"
  t.same(await outcomes(open.nodes[0]!.url), { "test allowed": 1, "test degraded": 3 }, "failed open: degraded, not allowed");
  t.same(await outcomes(closed.nodes[0]!.url), { "test allowed": 1, "test degraded": 3 }, "refused with 503: degraded");
});

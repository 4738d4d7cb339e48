/**
 * One slow owner (SIGSTOP) no longer makes a whole batch fail open (issue 22 item 3): an item
 * blocked on an owner that answers, or by this node's cached block of the slow owner's 429,
 * refuses the batch; only a batch with no item known to be blocked fails open.
 */
import t from "tap";
import { closeAgents, post } from "../../../harness/http-client.js";
import { hit, startCluster } from "../../../harness/cluster.js";

t.teardown(closeAgents);

t.test("a batch with a hung owner: items blocked elsewhere or in the cache still block it", async (t) => {
  // The hung owner must miss the peer deadline (2 s) while the detector keeps it on the ring (30 s).
  const cluster = await startCluster(3, { PEER_TIMEOUT_MS: "2000", FAILURE_TIMEOUT_MS: "30000" });
  t.teardown(() => cluster.stop());
  const node = (i: number) => cluster.nodes[i]!;
  const req = (identifier: string, lim = 2) => ({ namespace: "test", identifier, limit: lim, duration: 3600 });
  const onHealthy = cluster.identifierOwnedBy(1, "victim-healthy");
  const onHung = cluster.identifierOwnedBy(2, "victim-hung");
  const other = cluster.identifierOwnedBy(2, "other-hung");
  // Used up while every owner answers: on its owner for the first, through node 0 for the second (node 0 caches the 429).
  for (let i = 0; i < 3; i++) await post(node(1).url, "/limit", req(onHealthy));
  for (let i = 0; i < 3; i++) await post(node(0).url, "/limit", req(onHung));
  t.equal((await post(node(0).url, "/limit", req(onHung))).status, 429, "node 0 remembers the hung owner's block");

  node(2).signal("SIGSTOP");
  let resumed = false;
  t.teardown(() => {
    if (!resumed) node(2).signal("SIGCONT");
  });
  const across = await post(node(0).url, "/limit/batch", { requests: [req(onHealthy), req(other, 100)] });
  t.equal(across.status, 429, "blocked on the healthy owner: the batch is refused, not failed open");
  const cachedOnly = await post(node(0).url, "/limit/batch", { requests: [req(onHung), req(other, 100)] });
  t.equal(cachedOnly.status, 429, "blocked by node 0's cached block of the hung owner's 429: refused");
  const unknown = await post(node(0).url, "/limit/batch", { requests: [req(other, 100), req(cluster.identifierOwnedBy(1, "free"), 100)] });
  t.equal(unknown.status, 200, "nothing known to be blocked: fails open");
  t.equal(unknown.json.data.degraded, true);
  node(2).signal("SIGCONT");
  resumed = true;
  t.equal((await hit(node(1), onHealthy, 2)).status, 429, "the healthy owner still blocks its victim");
});

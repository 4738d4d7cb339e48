/**
 * A minority does not pretend (docs/faults.md): three real nodes; when a node sees fewer
 * than a majority of its configured members (here its two peers SIGSTOPped, so they stop
 * answering without closing anything), it turns /ready 503, sets ringlimit_cluster_quorum
 * to 0 and warns once, not once per check; when the peers resume, it is ready again. (At
 * start-up, before it has seen a quorum, it is not ready either: wrong-secret.process.test.ts.) The
 * fault suite shows the same with real partitions; this runs without root.
 */
import t from "tap";
import { closeAgents, request } from "../../harness/http-client.js";
import { metric, startCluster, waitForRing } from "../../harness/cluster.js";
import { eventually, sleep } from "../../harness/wait.js";

t.teardown(closeAgents);

const NO_QUORUM = "no cluster quorum: this node sees fewer than a majority of the members; /ready is 503";

t.test("a node that loses sight of both peers turns unready, says so in a metric and one warning, and recovers", async (t) => {
  // About failure detection: a peer silent for 600 ms leaves the ring (the harness's default is patient).
  const cluster = await startCluster(3, { HEARTBEAT_INTERVAL_MS: "100", FAILURE_TIMEOUT_MS: "600" });
  t.teardown(() => cluster.stop());
  const [a, b, c] = [cluster.nodes[0]!, cluster.nodes[1]!, cluster.nodes[2]!];
  await waitForRing([a, b, c], 3);
  t.equal((await request(a.url + "/ready")).status, 200, "ready with the whole cluster");
  t.equal(await metric(a, "ringlimit_cluster_quorum"), 1);

  b.signal("SIGSTOP");
  c.signal("SIGSTOP");
  t.teardown(() => {
    b.signal("SIGCONT");
    c.signal("SIGCONT");
  });
  t.ok(await eventually(async () => (await request(a.url + "/ready")).status === 503, 10_000), "/ready 503 once both peers are silent");
  t.equal(await metric(a, "ringlimit_cluster_quorum"), 0, "the metric says why");
  // Several detector rounds pass while it stays in the minority: still one warning.
  t.ok(await eventually(() => a.output().includes(NO_QUORUM), 5_000), "it warns");
  await sleep(1_500);
  t.equal(a.output().split(NO_QUORUM).length - 1, 1, "one warning, not one per check (at most one every 10 s)");
  t.equal((await request(a.url + "/ready")).status, 503, "still unready");

  b.signal("SIGCONT");
  c.signal("SIGCONT");
  t.ok(await eventually(async () => (await request(a.url + "/ready")).status === 200, 15_000), "ready again when the peers answer");
  t.equal(await metric(a, "ringlimit_cluster_quorum"), 1);
});

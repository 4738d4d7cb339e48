// Issue 14, must-have 6: a node that stops while it is cut off from every peer keeps its
// states in STATE_DIR and brings them back. Three real node processes; the peers are
// SIGSTOPped, so the leaving node's connections hang (no reset, no answer) as in a partition.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { clusterKey } from "../../../src/peer/link/cluster-secret.js";
import { readSnapshot, snapshotKey } from "../../../src/shard/records/snapshot-file.js";
import { SNAPSHOT_FILE } from "../../../src/shard/records/snapshotter.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { CLUSTER_SECRET, hit, startCluster, waitForRing } from "../../harness/cluster.js";
import { closeAgents } from "../../harness/http-client.js";
import { sleep } from "../../harness/wait.js";

t.teardown(closeAgents);

const YEAR = 31_536_000; // no window end and no refill worth a request during the test
const ALGORITHMS = [
  { name: "fixed-window", code: 0 },
  { name: "token-bucket", code: 2 },
];
const BEFORE = 3; // counted (and replicated) before the peers stop
const ISOLATED = 2; // counted by the node alone, its peers stopped

t.test("SIGTERM of a node whose peers hang: its states go to STATE_DIR, come back at restart and count on", async (t) => {
  const dirs = [0, 1, 2].map(() => mkdtempSync(path.join(tmpdir(), "ringlimit-isolated-")));
  t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  // The hand-off calls of the leaving node hang until the failure detector declares its
  // peers down, so the detector is set here (600 ms), not left to the harness's patient default.
  const detector = { HEARTBEAT_INTERVAL_MS: "100", FAILURE_TIMEOUT_MS: "600" };
  const cluster = await startCluster(3, { LOG_LEVEL: "info", SNAPSHOT_INTERVAL_MS: "3600000", ...detector }, (i) => ({ STATE_DIR: dirs[i]! }));
  t.teardown(async () => {
    for (const n of cluster.nodes) n?.signal("SIGCONT");
    await cluster.stop();
  });
  const [n1, n2] = cluster.nodes;
  const keys = ALGORITHMS.flatMap((algorithm) => [0, 1, 2].map((k) => ({ algorithm, id: cluster.identifierOwnedBy(2, `${algorithm.name}-${k}`) })));
  const ask = (node: (typeof cluster.nodes)[number], key: (typeof keys)[number]) => hit(node!, key.id, 100, { algorithm: key.algorithm.name, duration: YEAR });
  for (const key of keys) for (let i = 0; i < BEFORE; i++) t.equal((await ask(cluster.nodes[2], key)).json.data.count, i + 1);
  await sleep(300); // replicated to the other two

  n1!.signal("SIGSTOP");
  n2!.signal("SIGSTOP");
  for (const key of keys) for (let i = 0; i < ISOLATED; i++) t.equal((await ask(cluster.nodes[2], key)).json.data.count, BEFORE + i + 1, "decided alone");
  // At once: n3 still has both peers on its ring and its hand-off calls hang until the
  // failure detector declares them down.
  const leaving = cluster.nodes[2]!;
  const termAt = Date.now();
  leaving.signal("SIGTERM");
  t.same(await leaving.exited, { code: 0, signal: null }, "exit code 0");
  const exitMs = Date.now() - termAt;
  t.ok(exitMs < 5_000, `exited ${exitMs} ms after SIGTERM, before DRAIN_TIMEOUT_MS`);
  const left = leaving
    .output()
    .split("\n")
    .filter((l) => l.includes("left the ring"))
    .map((l) => JSON.parse(l) as { handedOver: number; notHandedOver: number })[0];
  t.equal(left?.handedOver, 0, "nothing handed over: nobody was reachable");
  t.ok((left?.notHandedOver ?? 0) >= keys.length, `${left?.notHandedOver} states kept`);

  // The snapshot written at stop holds every state n3 owned.
  const owned = new Set<string>();
  await readSnapshot(
    path.join(dirs[2]!, SNAPSHOT_FILE),
    { key: snapshotKey(clusterKey(CLUSTER_SECRET)), nodeId: cluster.members[2]! },
    (key, _state, replica) => {
      if (!replica) owned.add(key);
    },
  );
  t.same(
    keys.filter((k) => !owned.has(stateKeyOf(k.algorithm.code, YEAR, ringKeyOf("test", k.id)))).map((k) => k.id),
    [],
    "every state is in the snapshot",
  );

  // The peers resume (and promote their replicas of n3's keys, which miss the isolated
  // counts); n3 restarts from its snapshot and rejoins: the larger copy of each key wins.
  n1!.signal("SIGCONT");
  n2!.signal("SIGCONT");
  await waitForRing([n1!, n2!], 2);
  const back = await cluster.restart(2);
  t.match(back.output(), /restored states from snapshot/);
  await waitForRing([n1!, n2!, back], 3);
  await sleep(1_000); // the join hand-off
  for (const key of keys) {
    const via1 = await ask(n1, key);
    t.same([via1.json.data.count, via1.json.data.degraded ?? false], [BEFORE + ISOLATED + 1, false], `${key.algorithm.name} ${key.id} counts on, asked at n1`);
    t.equal((await ask(back, key)).json.data.count, BEFORE + ISOLATED + 2, "and at n3");
  }
});

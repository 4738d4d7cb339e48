/**
 * Replicas on other failure domains (docs/durability.md): four real nodes, two per ZONE, as
 * two machines running two processes each. Every key is used up to its limit, then both
 * nodes of one zone are SIGKILLed, one after the other. Ring order alone puts a key's two copies on the
 * same zone for about a third of the keys, so those were forgotten (allowed afresh) on the
 * survivors; with zones each key has a copy in each zone and every limit used up before
 * stays used up.
 */
import t from "tap";
import { closeAgents } from "../../harness/http-client.js";
import { hit, metric, startCluster, waitForRing } from "../../harness/cluster.js";
import { eventually, sleep } from "../../harness/wait.js";

t.teardown(closeAgents);

const LIMIT = 3;
const KEYS = 48;
const DAY = 86_400;

t.test("losing one zone of two keeps a copy of every count", async (t) => {
  const cluster = await startCluster(4, { REPLICAS: "2" }, (i) => ({ ZONE: i < 2 ? "zone-a" : "zone-b" }));
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes.map((n) => n!);
  const ids = Array.from({ length: KEYS }, (_, k) => `zoned-${k}`);
  const owners = new Array<number>(4).fill(0);
  for (const id of ids) owners[cluster.ownerOf("test", id)]!++;
  t.comment(`owners per node: ${owners.join(",")}`);

  // Each limit used up, through every node in turn.
  for (const [k, id] of ids.entries()) {
    for (let i = 0; i < LIMIT; i++) {
      const r = await hit(nodes[(k + i) % 4]!, id, LIMIT, { duration: DAY });
      t.equal(r.json?.data?.allowed, true, `${id} request ${i + 1} allowed`);
    }
  }
  // Every change acknowledged by its replica before the zone goes.
  t.ok(
    await eventually(async () => {
      const backlogs = await Promise.all(nodes.map((n) => metric(n, "ringlimit_replication_backlog_states")));
      return backlogs.every((b) => b === 0);
    }, 10_000),
    "replication caught up",
  );
  const replicaStates = await Promise.all(nodes.map((n) => metric(n, "ringlimit_replica_states")));
  t.equal(
    replicaStates.reduce((a, b) => a! + b!, 0),
    KEYS,
    "one replica per key",
  );

  // One node of zone-a first: its keys' next owner on the ring is often the other node of
  // zone-a, which holds no copy (the copy is in zone-b); the copy's holder sends it over.
  nodes[0]!.signal("SIGKILL");
  await waitForRing([nodes[1]!, nodes[2]!, nodes[3]!], 3);
  t.equal(await forgotten([nodes[1]!, nodes[2]!, nodes[3]!], "one node of zone-a"), 0);
  // Then the rest of zone-a.
  nodes[1]!.signal("SIGKILL");
  const survivors = [nodes[2]!, nodes[3]!];
  await waitForRing(survivors, 2);
  t.equal(await forgotten(survivors, "all of zone-a"), 0);

  async function forgotten(via: typeof nodes, after: string): Promise<number> {
    let n = 0;
    // The new owners receive their copies in the pass that follows the ring change.
    await sleep(500);
    await eventually(async () => (await Promise.all(via.map((v) => metric(v, "ringlimit_replication_backlog_states")))).every((b) => b === 0), 10_000);
    for (const [k, id] of ids.entries()) {
      const r = await hit(via[k % via.length]!, id, LIMIT, { duration: DAY });
      t.equal(r.status, 429, `${id}: still used up after losing ${after}`);
      if (r.json?.data?.allowed === true) n++;
    }
    t.comment(`keys forgotten after losing ${after}: ${n} of ${KEYS}`);
    return n;
  }
});

/**
 * A concurrency lease's own lapse second reaches its replica (#41 item 4, peer-protocol
 * feature 16, REPLICATE_FINE): after its owner is SIGKILLed (no hand-off), the replica promoted
 * frees a 12 s lease 12 to 13 s after it was granted, not at its bucket's end (buckets of 3 s:
 * taken early in a bucket, the bucket ends two seconds after the lease's own second), and never
 * before its duration. A replica held at protocol 15 gets the buckets alone, as before.
 */
import t, { type Test } from "tap";
import { metric, startCluster, waitForRing } from "../../harness/cluster.js";
import { closeAgents, limit } from "../../harness/http-client.js";
import type { NodeProcess } from "../../harness/node-process.js";
import { eventually, sleep } from "../../harness/wait.js";
import { watchLapse } from "./lease-lapse-watch.js";

t.teardown(closeAgents);

const D = 12;
const W = 3000;
const NS = "conc";

async function killOwnerAndWatch(t: Test, replicaEnv: Record<string, string>, fine: boolean): Promise<void> {
  // Node 1 is the key's replica: its owner on the ring without node 0 (the next member after it).
  const cluster = await startCluster(3, { REPLICAS: "2" }, (i): Record<string, string> => (i === 1 ? replicaEnv : {}));
  t.teardown(() => cluster.stop());
  const [owner, replica, other] = cluster.nodes as NodeProcess[];
  const withoutOwner = cluster.members.filter((_, i) => i !== 0);
  let identifier = "";
  for (let i = 0; identifier === ""; i++) {
    const id = `lapse-replica-${i}`;
    if (cluster.ownerOf(NS, id) === 0 && cluster.ownerOf(NS, id, withoutOwner) === 1) identifier = id;
  }
  const key = { namespace: NS, identifier, limit: 1, duration: D, algorithm: "concurrency" };
  // Start where now + D lies early in a bucket: its own second ends 2 s before the bucket does.
  while ((Date.now() + D * 1000) % W < 50 || (Date.now() + D * 1000) % W >= 700) await sleep(20);
  const sent = Date.now();
  const a = await limit(owner!.url, key);
  const answered = Date.now();
  t.equal(a.status, 200, "granted by the owner");
  const lapse = a.json.data.reset_time * 1000;
  t.ok(lapse - sent >= D * 1000 && lapse - answered <= D * 1000 + 1000, `its own second, ${lapse - sent} ms after the request`);
  const bucketEnd = Math.ceil(lapse / W) * W;
  t.equal(bucketEnd - lapse, 2000, "its bucket ends two seconds later");
  // Held by the replica before the owner dies (the lag is milliseconds; the bound is for a loaded machine).
  t.ok(await eventually(async () => (await metric(replica!, "ringlimit_replica_states")) === 1, 10_000), "the replica holds the state");

  owner!.signal("SIGKILL");
  await owner!.exited;
  await waitForRing([replica!, other!], 2, 30_000);
  t.ok(Date.now() < sent + D * 1000 - 1500, "the replica was promoted well before the lease's duration");

  await watchLapse(t, replica!.url, key, { sent, lapse, bucketEnd, D, fine, who: "the promoted replica", coarse: "a replica of protocol 15" });
}

t.test("SIGKILL of the owner: the promoted replica (protocol 16) frees the slot at the lease's own second", (t) => killOwnerAndWatch(t, {}, true));
t.test("SIGKILL of the owner: a replica at PEER_PROTOCOL_MAX=15 has the buckets alone, as before", (t) =>
  killOwnerAndWatch(t, { PEER_PROTOCOL_MAX: "15" }, false),
);

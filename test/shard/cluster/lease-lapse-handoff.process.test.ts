/**
 * A concurrency lease's own lapse second travels with its state (#41 item 4, peer-protocol
 * feature 15): after its owner hands its states to the heir on SIGTERM, an 8 s lease still
 * lapses 8 to 9 s after it was granted, on the heir, not at its bucket's end (buckets of 2 s:
 * taken early in an even second, the bucket ends a whole second after the lease's own). It is
 * never freed before its duration. An heir held at protocol 13 gets the buckets alone, as
 * before: the slot lapses at its bucket's end.
 */
import t, { type Test } from "tap";
import { startCluster, waitForRing } from "../../harness/cluster.js";
import { concurrency } from "../../../src/algorithms/concurrency.js";
import { newStep } from "../../../src/algorithms/index.js";
import { encodeStatesWithFine } from "../../../src/shard/records/fine-records.js";
import { CallMethod } from "../../../src/shard/cluster/wire/call-methods.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { memberClient } from "../../peer/helpers.js";
import { limit } from "../../harness/http-client.js";
import { watchLapse } from "./lease-lapse-watch.js";
import { sleep } from "../../harness/wait.js";

const D = 8;

async function handOffAndWatch(t: Test, heirEnv: Record<string, string>, fine: boolean): Promise<void> {
  const cluster = await startCluster(2, {}, (i): Record<string, string> => (i === 1 ? heirEnv : {}));
  t.teardown(() => cluster.stop());
  const [owner, heir] = [cluster.nodes[0]!, cluster.nodes[1]!];
  // Owned by the node stopped, in the key's own namespace (an identifier owned by it in
  // namespace "test" was owned by the heir half the time: no hand-off, the heir's own overlay).
  const key = {
    namespace: "conc",
    identifier: cluster.identifierOwnedBy(0, "lapse-handoff", undefined, "conc"),
    limit: 1,
    duration: D,
    algorithm: "concurrency",
  };
  // Start in the first 700 ms of an even second: there the bucket ends a whole second after the lease's own.
  while (Date.now() % 2000 < 50 || Date.now() % 2000 >= 700) await sleep(20);
  const sent = Date.now();
  const a = await limit(owner.url, key);
  const answered = Date.now();
  t.equal(a.status, 200, "granted by the owner");
  const lapse = a.json.data.reset_time * 1000;
  t.ok(lapse - sent >= D * 1000 && lapse - answered <= D * 1000 + 1000, `its own second, ${lapse - sent} ms after the request`);
  const bucketEnd = Math.ceil(lapse / 2000) * 2000;
  t.equal(bucketEnd - lapse, 1000, "its bucket ends a second later");

  owner.signal("SIGTERM");
  await owner.exited;
  await waitForRing([heir], 1, 30_000);
  t.ok(Date.now() < sent + D * 1000 - 1500, "the hand-off was over well before the lease's duration");

  await watchLapse(t, heir.url, key, { sent, lapse, bucketEnd, D, fine, who: "the heir", coarse: "an heir of protocol 13" });
}

t.test("SIGTERM: the heir (protocol 15) frees the slot at the lease's own second", (t) => handOffAndWatch(t, {}, true));
t.test("SIGTERM to an heir at PEER_PROTOCOL_MAX=13: the buckets alone, as before", (t) => handOffAndWatch(t, { PEER_PROTOCOL_MAX: "13" }, false));

t.test("a forged overlay (a peer's MERGE_FINE saying a held slot lapses in a second) frees nothing early", async (t) => {
  const cluster = await startCluster(1);
  t.teardown(() => cluster.stop());
  const node = cluster.nodes[0]!;
  const forger = await memberClient(t, cluster, 0, "forger");
  const id = "forged-overlay";
  const key = stateKeyOf(concurrency.code, D, ringKeyOf("conc", id));
  const now = Date.now();
  const out = newStep();
  concurrency.step(null, 1, D * 1000, now, out, 1);
  const state = { a: out.a, b: out.b, c: out.c, expiresAt: Math.ceil(out.resetMs / 1000), origin: 1, born: Math.floor(now / 1000) };
  const forged = { s: [Math.ceil(now / 1000) + 1], m: [1], a: 0, b: 0, c: 0 };
  const reply = await forger.call(CallMethod.MERGE_FINE, encodeStatesWithFine([{ key, state }], [{ key, fine: forged }], now));
  t.equal(reply.readUInt32BE(0), 1, "the state merged");
  const q = { namespace: "conc", identifier: id, limit: 1, duration: D, algorithm: "concurrency" };
  t.equal((await limit(node.url, q)).status, 429, "the slot it carries is held");
  await sleep(Math.max(0, now + 2_500 - Date.now()));
  const later = await limit(node.url, q);
  t.equal(later.status, 429, "still held after the forged lapse: the overlay did not refine the state and was dropped");
  t.ok(later.json.data.retry_after * 1000 >= D * 1000 - 2_500 - 1_000, `retry_after ${later.json.data.retry_after} s: the bucket's end, not the forged second`);
});

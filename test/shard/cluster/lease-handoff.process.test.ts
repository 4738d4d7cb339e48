/**
 * Fine lapses stay on the owner that granted them (shard/local/fine-store.ts): when the owner
 * leaves, its heir gets the five bucket counts alone, here a node held to an older peer
 * protocol (PEER_PROTOCOL_MAX=12). Held slots are never undercounted across it: the heir
 * admits no one more, names a lapse no earlier than the lease's own second (and no later
 * than its bucket's end), and frees a slot for a lease the old owner granted, once.
 */
import t from "tap";
import { startCluster, waitForRing } from "../../harness/cluster.js";
import { limit, post } from "../../harness/http-client.js";

const D = 600; // buckets of 150 s: far more than a hand-off takes, so nothing lapses during the test

t.test("a hand-off to a node of protocol 12 keeps every held slot; its leases still release there, once", async (t) => {
  const cluster = await startCluster(2, {}, (i): Record<string, string> => (i === 1 ? { PEER_PROTOCOL_MAX: "12" } : {}));
  t.teardown(() => cluster.stop());
  const [owner, heir] = [cluster.nodes[0]!, cluster.nodes[1]!];
  const key = { namespace: "test", identifier: cluster.identifierOwnedBy(0, "lease-handoff"), limit: 2, duration: D, algorithm: "concurrency" };

  const before = Date.now();
  const a = await limit(heir.url, key);
  const b = await limit(owner.url, key);
  t.same([a.status, b.status], [200, 200], "two slots held, granted by the owner");
  t.ok(a.json.data.reset_time * 1000 - before < D * 1000 + 1000 + 5_000, "its own lapse second, within a second of the duration");
  t.equal((await limit(heir.url, key)).status, 429, "full");

  owner.signal("SIGTERM");
  await owner.exited;
  await waitForRing([heir], 1, 30_000);

  const sent = Date.now();
  const full = await limit(heir.url, key);
  t.equal(full.status, 429, "the heir admits no one more: the held slots came with the buckets");
  t.equal(full.json.data.degraded, undefined);
  const named = sent + full.json.data.retry_after * 1000;
  const own = Math.min(a.json.data.reset_time, b.json.data.reset_time) * 1000;
  t.ok(named >= own - 1000, `the next slot frees no earlier than the first lease's own second (${named - own} ms after it)`);
  t.ok(named <= Math.ceil(own / 150_000) * 150_000 + 1000, "nor later than its bucket's end");

  const r = await post(heir.url, "/limit/release", { ...key, lease: a.json.data.lease });
  t.equal(r.json.data.released, true, "a lease of the old owner frees its slot on the heir");
  t.equal((await post(heir.url, "/limit/release", { ...key, lease: a.json.data.lease })).json.data.released, false, "once");
  const taken = await Promise.all([limit(heir.url, key), limit(heir.url, key), limit(heir.url, key)]);
  t.equal(taken.filter((x) => x.status === 200).length, 1, "exactly the freed slot is taken again");
});

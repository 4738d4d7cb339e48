/**
 * A concurrency lease lapses within a second of its `duration` on a real node (issue #41
 * item 4), not at the end of its D/4 bucket: an 8 s lease (buckets of 2 s) taken in the
 * first part of an even second would be held to the end of the next odd one by its bucket.
 */
import t from "tap";
import { limit, post } from "../../harness/http-client.js";
import { useTestNode } from "../../harness/in-process-node.js";
import { uniqueId } from "../../harness/contract.js";
import { sleep } from "../../harness/wait.js";

const node = useTestNode(t);
const D = 8;

t.test("an 8 s lease lapses 8 to 9 s after it was taken; the 429 says so; then the slot is free", async (t) => {
  const key = { namespace: "conc", identifier: uniqueId("lapse"), limit: 1, duration: D, algorithm: "concurrency" };
  // Start in the first 700 ms of an even second: there the bucket ends a whole second after the lease's own.
  while (Date.now() % 2000 < 50 || Date.now() % 2000 >= 700) await sleep(20);
  const before = Date.now();
  const a = await limit(node.url, key);
  const after = Date.now();
  t.equal(a.status, 200);
  const lapse = a.json.data.reset_time * 1000;
  t.ok(lapse - before >= D * 1000, `held at least ${D} s (${lapse - before} ms after the request was sent)`);
  t.ok(lapse - after <= D * 1000 + 1000, `and at most ${D} s + 1 s (${lapse - after} ms after it was answered)`);

  const sent = Date.now();
  const full = await limit(node.url, key);
  t.equal(full.status, 429);
  const named = sent + full.json.data.retry_after * 1000;
  t.ok(Math.abs(named - lapse) < 1000, `retry_after ${full.json.data.retry_after} s: until that lapse`);

  await sleep(Math.max(0, lapse + 20 - Date.now()));
  const again = await limit(node.url, key);
  t.equal(again.status, 200, "free from its lapse second on");
  t.equal((await post(node.url, "/limit/release", { ...key, lease: a.json.data.lease })).json.data.released, false, "the lapsed lease frees nothing");
  t.equal((await post(node.url, "/limit/release", { ...key, lease: again.json.data.lease })).json.data.released, true, "the new one frees its slot");
  t.equal((await limit(node.url, key)).status, 200);
});

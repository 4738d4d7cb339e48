/**
 * A concurrency lease's own lapse second is written in the snapshot (format 4) and restored
 * with its state (#41 item 4): after a SIGTERM and a restart from STATE_DIR, an 8 s lease
 * lapses 8 to 9 s after it was granted, not at its bucket's end (buckets of 2 s: taken early
 * in an even second, the bucket ends a whole second after the lease's own), and never before
 * its duration.
 */
import t from "tap";
import { closeAgents, limit } from "../../harness/http-client.js";
import { sleep } from "../../harness/wait.js";
import { node, stateDir } from "./snapshot-node.js";

t.teardown(closeAgents);
const D = 8;

t.test("SIGTERM and restart from STATE_DIR: the slot frees at the lease's own second", async (t) => {
  const dir = stateDir(t);
  const first = await node(t, { STATE_DIR: dir, SNAPSHOT_INTERVAL_MS: "3600000" });
  const key = { namespace: "conc", identifier: "lapse-restore", limit: 1, duration: D, algorithm: "concurrency" };
  while (Date.now() % 2000 < 50 || Date.now() % 2000 >= 700) await sleep(20);
  const sent = Date.now();
  const a = await limit(first.url, key);
  t.equal(a.status, 200);
  const lapse = a.json.data.reset_time * 1000;
  const bucketEnd = Math.ceil(lapse / 2000) * 2000;
  t.equal(bucketEnd - lapse, 1000, "its bucket ends a second after its own lapse");
  first.signal("SIGTERM");
  t.same(await first.exited, { code: 0, signal: null });
  const second = await node(t, { STATE_DIR: dir });
  t.ok(Date.now() < sent + D * 1000 - 1500, "restarted well before the lease's duration");

  const asked = Date.now();
  const full = await limit(second.url, key);
  t.equal(full.status, 429, "the restored state holds the slot");
  const named = asked + full.json.data.retry_after * 1000;
  t.ok(Math.abs(named - lapse) < 1000, `retry_after ${full.json.data.retry_after} s names the lease's own second`);

  await sleep(Math.max(0, sent + D * 1000 - 400 - Date.now()));
  t.equal((await limit(second.url, key)).status, 429, "still held just before its duration");
  await sleep(Math.max(0, lapse + 50 - Date.now()));
  t.equal((await limit(second.url, key)).status, 200, `free from its own second, ${Date.now() - sent} ms after the grant`);
});

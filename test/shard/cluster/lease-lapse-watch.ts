/**
 * What the lease-lapse process tests watch on the node that took a key over (an heir, a
 * promoted replica): it holds the slot, names when it frees, never frees it before the lease's
 * duration, and frees it at the lease's own second (`fine`) or at its bucket's end.
 */
import type { Test } from "tap";
import { limit } from "../../harness/http-client.js";
import { sleep } from "../../harness/wait.js";

export interface Lapse {
  /** when the grant was asked for, its own lapse and its bucket's end (unix ms) */
  sent: number;
  lapse: number;
  bucketEnd: number;
  /** the lease's duration, s */
  D: number;
  /** the lapse seconds came with the state: it frees at `lapse`, else at `bucketEnd` */
  fine: boolean;
  /** who holds it now, for the messages ("the heir", "the promoted replica") and what it is below `fine` */
  who: string;
  coarse: string;
}

export async function watchLapse(t: Test, url: string, key: object, l: Lapse): Promise<void> {
  const asked = Date.now();
  const full = await limit(url, key);
  t.equal(full.status, 429, `${l.who} holds the slot: it came with the state`);
  t.equal(full.json.data.degraded, undefined);
  const named = asked + full.json.data.retry_after * 1000;
  const expected = l.fine ? l.lapse : l.bucketEnd;
  t.ok(Math.abs(named - expected) < 1000, `retry_after ${full.json.data.retry_after} s names ${l.fine ? "the lease's own second" : "its bucket's end"}`);

  // Never freed before its duration: the slot is held at least D after the grant was asked for.
  await sleep(Math.max(0, l.sent + l.D * 1000 - 400 - Date.now()));
  t.equal((await limit(url, key)).status, 429, "still held just before its duration");

  await sleep(Math.max(0, l.lapse + 50 - Date.now()));
  const atLapse = await limit(url, key);
  if (l.fine) {
    t.equal(atLapse.status, 200, `free on ${l.who} from its own second on, ${Date.now() - l.sent} ms after the grant (within ${l.D} to ${l.D + 1} s)`);
  } else {
    t.equal(atLapse.status, 429, `${l.coarse} holds it to its bucket's end`);
    await sleep(Math.max(0, l.bucketEnd + 50 - Date.now()));
    t.equal((await limit(url, key)).status, 200, "and frees it then");
  }
}

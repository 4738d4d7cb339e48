/**
 * Eviction keeps the states that matter, and the table stays under its byte bound whatever
 * keys callers choose (issue 10, item 3). The real StateTable, driven through its algorithms.
 *
 * Before (commit 81f8649, eviction by earliest expiry among 5 samples): a flood of fresh keys
 * with one-year windows evicted a blocked victim (limit 100, one-hour window) from a full
 * 10,000-state table within 1,267-9,981 inserts (5 trials of bench/eviction-flood.mjs); the table had no
 * byte bound at all.
 */
import t from "tap";
import { newStep } from "../../../src/algorithms/index.js";
import { fixedWindow } from "../../../src/algorithms/fixed-window.js";
import { stringBytes } from "../../../src/shard/table/key-bytes.js";
import { StateTable } from "../../../src/shard/table/state-table.js";

const T0 = 1_800_000_000_000;
const HOUR = 3_600_000;
const YEAR = 31_536_000_000;
const out = newStep();
const hit = (table: StateTable, key: string, limit: number, durationMs: number, now = T0) => {
  table.decide(key, fixedWindow, limit, durationMs, now, out);
  return out.allowed;
};

t.test("a flood of fresh keys does not free a blocked victim's counter", async (t) => {
  const table = new StateTable(10_000, T0);
  for (let i = 0; i < 9_999; i++) for (let r = 0; r < 1 + (i % 20); r++) hit(table, "legit" + i, 50, HOUR);
  for (let r = 0; r < 100; r++) hit(table, "victim", 100, HOUR);
  t.notOk(hit(table, "victim", 100, HOUR), "victim blocked");
  // The attacker's cheapest flood: one request per fresh key, a window that outlives the victim's.
  for (let i = 0; i < 200_000; i++) hit(table, "flood" + i, 1_000_000, YEAR);
  t.equal(table.size, 10_000);
  t.notOk(hit(table, "victim", 100, HOUR), "still blocked after 200,000 inserts");
  t.equal(table.get("victim")?.b, 100, "its count intact");
  t.equal(table.checkInvariants(), undefined);
});

t.test("what a flood must spend instead: states that counted as much as the victim", async (t) => {
  const table = new StateTable(1_000, T0);
  for (let r = 0; r < 10; r++) hit(table, "victim", 10, HOUR);
  // Flood keys that each counted 10 requests, with later expiries: now the victim is fair game.
  let inserts = 0;
  while (table.get("victim") !== undefined && inserts < 100_000) {
    for (let r = 0; r < 10; r++) hit(table, "heavy" + inserts, 10, YEAR);
    inserts++;
  }
  t.ok(table.get("victim") === undefined, `evicted after ${inserts} heavy keys (${inserts * 10} requests)`);
});

t.test("already expired states go before live ones, whatever they counted", async (t) => {
  const table = new StateTable(100, T0);
  for (let r = 0; r < 50; r++) hit(table, "expired-heavy", 50, 1000);
  for (let i = 0; i < 99; i++) hit(table, "fresh" + i, 1000, HOUR);
  table.sweep(T0); // nothing due yet
  // 2 s later the heavy state is past its window; a sweep has not dropped it yet.
  let evictedFirst = false;
  for (let i = 0; i < 100 && !evictedFirst; i++) {
    hit(table, "new" + i, 1000, HOUR, T0 + 2000);
    // lastSweptSecond is T0's second: expiry <= that + 1 counts as expired.
    evictedFirst = table.get("expired-heavy") === undefined;
  }
  t.ok(evictedFirst, "the expired heavy state was evicted while fresh live ones stayed");
});

t.test("the byte bound holds with maximal keys; the table keeps deciding exactly", async (t) => {
  const maxBytes = 4 * 1024 * 1024;
  const table = new StateTable(5_000_000, T0, maxBytes);
  // ~3 KB per key: two-byte namespace, long slug, two-byte identifier.
  const big = (i: number) => `${0}3600:${"中".repeat(256)}.${"rad-s2-".repeat(110)}${"中".repeat(500)}${String(i).padStart(12, "0")}`;
  t.ok(stringBytes(big(0)) > 3000, `a maximal key costs ${stringBytes(big(0))} bytes of string`);
  let maxSeen = 0;
  for (let i = 0; i < 20_000; i++) {
    hit(table, big(i), 1000, HOUR);
    if (table.bytes > maxSeen) maxSeen = table.bytes;
  }
  t.ok(maxSeen <= maxBytes, `bytes never above the bound (max ${maxSeen} of ${maxBytes})`);
  t.ok(table.size > 500 && table.size < 1500, `${table.size} maximal keys held in 4 MiB`);
  t.ok(table.evictions > 18_000, `${table.evictions} evicted`);
  t.equal(table.checkInvariants(), undefined);
  // Exact under the bound: a key decided many times counts every request.
  for (let r = 1; r <= 5; r++) {
    hit(table, "exact", 5, HOUR);
    t.equal(out.remaining, 5 - r);
  }
  t.notOk(hit(table, "exact", 5, HOUR));
});

t.test("short keys: the byte bound allows what MAX_KEYS allows when the keys are small", async (t) => {
  const table = new StateTable(100_000, T0, 64 * 1024 * 1024);
  for (let i = 0; i < 100_000; i++) hit(table, "k" + i, 10, HOUR);
  t.equal(table.size, 100_000, "no eviction");
  t.equal(table.evictions, 0);
  t.ok(table.bytes < 16 * 1024 * 1024, `${(table.bytes / 100_000).toFixed(1)} bytes per short key`);
});

t.test("stringBytes: one byte per character below U+0100, else two; header and alignment", async (t) => {
  t.equal(stringBytes(""), 16);
  t.equal(stringBytes("a"), 24);
  t.equal(stringBytes("abcdefgh"), 24);
  t.equal(stringBytes("abcdefghi"), 32);
  t.equal(stringBytes("é".repeat(8)), 24, "Latin-1 is one byte");
  t.equal(stringBytes("a中"), 24, "two-byte: 16 + 4");
  t.equal(stringBytes("中".repeat(100)), 216);
});

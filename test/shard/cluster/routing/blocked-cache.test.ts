/** The blocked cache: a block stands until its time for its limit only, and the cache stays within its bytes, also after clear() (the client clears it after a reset). */
import t from "tap";
import { BlockedCache } from "../../../../src/shard/cluster/routing/blocked-cache.js";
import { StateTable } from "../../../../src/shard/table/state-table.js";

const T0 = 1_800_000_000_000;

t.test("a remembered block stands until its time, for the same limit only", async (t) => {
  const cache = new BlockedCache();
  cache.remember("k", 5, T0, 1500, 1_800_000_002);
  t.match(cache.get("k", 5, T0), { until: T0 + 1500, limit: 5, resetTime: 1_800_000_002 });
  t.ok(cache.get("k", 5, T0 + 1499), "just before its end");
  t.equal(cache.get("k", 6, T0 + 10), undefined, "another limit for the same key is not blocked by it");
  t.equal(cache.get("k", 5, T0 + 10), undefined, "and the entry is gone: the owner decides the new limit");
  t.equal(cache.get("other", 5, T0), undefined);
});

t.test("an expired block is forgotten, and its bytes given back", async (t) => {
  const cache = new BlockedCache();
  cache.remember("k", 5, T0, 1000, 0);
  t.equal(cache.get("k", 5, T0 + 1000), undefined, "at its end");
  t.equal(cache.get("k", 5, T0), undefined, "deleted, even for an earlier clock");
  t.equal(cache.bytes, 0);
});

t.test("bounded in bytes: the oldest blocks go first", async (t) => {
  const cache = new BlockedCache(64 * 1024);
  for (let i = 0; i < 5000; i++) cache.remember(`key${i}${"中".repeat(100)}`, 10, T0, 60_000, T0 / 1000 + 60);
  t.ok(cache.bytes <= 64 * 1024, `${cache.bytes} bytes held`);
  t.ok(cache.get(`key4999${"中".repeat(100)}`, 10, T0 + 1), "the newest is remembered");
  t.equal(cache.get(`key0${"中".repeat(100)}`, 10, T0 + 1), undefined, "the oldest was forgotten");
});

t.test("clear() gives back the bytes: filling it again does not throw", async (t) => {
  const cache = new BlockedCache(64 * 1024);
  for (let i = 0; i < 1000; i++) cache.remember(`a${i}`, 10, T0, 60_000, T0 / 1000 + 60);
  cache.clear();
  t.equal(cache.bytes, 0);
  // Before: heldBytes kept its count, and the eviction loop read an entry from an empty map (TypeError).
  t.doesNotThrow(() => {
    for (let i = 0; i < 1000; i++) cache.remember(`b${i}`, 10, T0, 60_000, T0 / 1000 + 60);
  });
  t.ok(cache.get("b999", 10, T0 + 1));
});

t.test("forgetIdentifier drops every block of one identifier, and ignores a block answered to a request received before it", async (t) => {
  const cache = new BlockedCache();
  cache.remember("060:4:testu", 5, T0, 60_000, 0);
  cache.remember("13600:4:testu", 5, T0, 60_000, 0);
  cache.remember("060:4:testuu", 5, T0, 60_000, 0);
  const bytes = cache.bytes;
  t.equal(cache.forgetIdentifier("4:testu", T0 + 10), 2, "both limits of the identifier");
  t.equal(cache.get("060:4:testu", 5, T0 + 20), undefined);
  t.equal(cache.get("13600:4:testu", 5, T0 + 20), undefined);
  t.ok(cache.get("060:4:testuu", 5, T0 + 20), "another identifier whose ring key it begins is kept");
  t.ok(cache.bytes < bytes / 2, "their bytes given back");
  cache.remember("060:4:testu", 5, T0 + 5, 60_000, 0);
  t.equal(cache.get("060:4:testu", 5, T0 + 20), undefined, "asked before the reset was heard of: not cached");
  cache.remember("060:4:testu", 5, T0 + 11, 60_000, 0);
  t.ok(cache.get("060:4:testu", 5, T0 + 20), "asked after: cached");
  t.equal(cache.forgetIdentifier("4:nothing", T0 + 30), 0);
});

t.test("on a node the resets heard of live in the state table's memory of resets: one memory, counted in its bytes", async (t) => {
  const table = new StateTable(1000, T0, 1 << 20);
  const before = table.bytes;
  const cache = new BlockedCache(64 * 1024, table.resets);
  cache.forgetIdentifier("4:testu", T0);
  t.ok(table.bytes > before, `counted with the states (${before} → ${table.bytes} bytes)`);
  t.equal(table.resets.resetHeardAt("4:testu", T0 + 1), T0);
  t.equal(table.resetAt("4:testu", T0 + 1), undefined, "heard of, not made here: merges drop nothing for it");
  cache.remember("060:4:testu", 5, T0 - 1, 60_000, 0);
  t.equal(cache.get("060:4:testu", 5, T0 + 1), undefined, "a block asked before it is not kept");
  table.noteReset("4:testu", T0 + 2);
  t.equal(table.resets.resetHeardAt("4:testu", T0 + 3), T0, "a reset made here keeps the one heard of");
  t.equal(table.resets.resetHeardAt("4:testu", T0 + 60_001), undefined, "both forgotten after RESET_MEMORY_MS");
});

import t from "tap";
import { BlockedCache } from "../../../src/shard/cluster/blocked-cache.js";

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

t.test("an expired block is forgotten", async (t) => {
  const cache = new BlockedCache();
  cache.remember("k", 5, T0, 1000, 0);
  t.equal(cache.get("k", 5, T0 + 1000), undefined, "at its end");
  t.equal(cache.get("k", 5, T0), undefined, "deleted, even for an earlier clock");
});

t.test("bounded: when full it starts over", async (t) => {
  const cache = new BlockedCache();
  let n = 0;
  // Fill until the first entry disappears: that is the bound.
  for (; n < 1_000_000; n++) {
    cache.remember(`k${n}`, 1, T0, 60_000, 0);
    if (cache.get("k0", 1, T0) === undefined) break;
  }
  t.ok(n > 1000 && n < 1_000_000, `started over after ${n} entries`);
  t.ok(cache.get(`k${n}`, 1, T0), "the newest entry is kept");
});

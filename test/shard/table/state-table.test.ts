import t from "tap";
import { prng } from "../../harness/prng.js";
import { ALGORITHMS, newStep } from "../../../src/algorithms/index.js";
import { fixedWindow } from "../../../src/algorithms/fixed-window.js";
import { tokenBucket } from "../../../src/algorithms/token-bucket.js";
import { LocalDecider } from "../../../src/shard/local/local-decider.js";
import { parseStateKey, ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { StateTable } from "../../../src/shard/table/state-table.js";
import { SlotCosts } from "../../../src/shard/table/slot-costs.js";
import { Slab, widened } from "../../../src/shard/table/widen.js";

const T0 = 1_800_000_000_000;

function decideN(table: StateTable, key: string, n: number, limit: number, durationMs: number, now: number, alg = fixedWindow) {
  const out = newStep();
  for (let i = 0; i < n; i++) table.decide(key, alg, limit, durationMs, now, out);
  return out;
}

t.test("keys: length-prefixed, so no namespace/identifier pair collides", async (t) => {
  t.not(ringKeyOf("a", "b.c"), ringKeyOf("a.b", "c"));
  t.not(ringKeyOf("1:a", "b"), ringKeyOf("1", ":ab"));
  const key = stateKeyOf(3, 31536000, ringKeyOf("ns.prod", "user:1"));
  t.same(parseStateKey(key), { algorithmCode: 3, duration: 31536000, ringKey: ringKeyOf("ns.prod", "user:1") });
  t.equal(parseStateKey("garbage"), undefined);
});

t.test("limits with different durations or algorithms on one identifier never share state", async (t) => {
  const table = new StateTable(1000, T0);
  const decider = new LocalDecider(table);
  const q = (duration: number, alg = 0) => ({ namespace: "ns", identifier: "u", limit: 2, duration, algorithm: ALGORITHMS[alg]!, cost: 1 });
  t.equal(decider.decideNow(q(60), ringKeyOf("ns", "u"), T0).remaining, 1);
  t.equal(decider.decideNow(q(60), ringKeyOf("ns", "u"), T0).remaining, 0);
  t.equal(decider.decideNow(q(60), ringKeyOf("ns", "u"), T0).allowed, false);
  t.equal(decider.decideNow(q(3600), ringKeyOf("ns", "u"), T0).remaining, 1, "per hour: its own state");
  t.equal(decider.decideNow(q(60, 1), ringKeyOf("ns", "u"), T0).remaining, 1, "another algorithm: its own state");
  t.equal(table.size, 3);
});

t.test("a blocked request stores nothing new", async (t) => {
  const table = new StateTable(10, T0);
  decideN(table, "k", 2, 2, 60_000, T0);
  const before = table.get("k");
  decideN(table, "k", 5, 2, 60_000, T0);
  t.same(table.get("k"), before);
});

t.test("expiry: a state is dropped once it is equivalent to a fresh one, not before", async (t) => {
  const table = new StateTable(100, T0);
  decideN(table, "a", 1, 5, 10_000, T0); // window ends T0 + 10 s
  decideN(table, "b", 1, 5, 60_000, T0); // window ends T0 + 60 s
  t.equal(table.sweep(T0 + 9_999), 0);
  t.equal(table.size, 2);
  t.equal(table.sweep(T0 + 10_000), 1, "a's window is over");
  t.equal(table.get("a"), undefined);
  t.ok(table.get("b"));
  t.equal(table.sweep(T0 + 60_000), 1);
  t.equal(table.size, 0);
  t.equal(table.expirations, 2);
});

t.test("expiry: a key whose expiry moved later is re-listed, not dropped", async (t) => {
  const table = new StateTable(100, T0);
  const out = newStep();
  table.decide("tb", tokenBucket, 2, 10_000, T0, out); // full again at T0 + 5 s
  t.equal(out.resetMs, T0 + 5000);
  table.decide("tb", tokenBucket, 2, 10_000, T0 + 4000, out); // now full again at T0 + 9.x s
  t.equal(table.sweep(T0 + 5000), 0, "moved on: kept");
  t.ok(table.get("tb"));
  t.equal(table.sweep(T0 + 9_999), 0);
  t.equal(table.sweep(T0 + 10_000), 1);
});

t.test("expiry: a long gap between sweeps walks the lists, not the seconds", async (t) => {
  const table = new StateTable(100, T0);
  for (let i = 0; i < 50; i++) decideN(table, "k" + i, 1, 5, (i + 1) * 1000, T0);
  const started = performance.now();
  t.equal(table.sweep(T0 + 400 * 24 * 3600 * 1000), 50, "a 400-day jump drops everything");
  t.ok(performance.now() - started < 1000, "without iterating 34 M seconds");
});

t.test("MAX_KEYS bounds the table; evictions are counted", async (t) => {
  const table = new StateTable(1000, T0);
  for (let i = 0; i < 5000; i++) decideN(table, "key" + i, 1, 10, 60_000 + (i % 7) * 1000, T0);
  t.equal(table.size, 1000);
  t.equal(table.evictions, 4000);
  let seen = 0;
  table.forEach((key, state) => {
    seen++;
    if (!key.startsWith("key") || !(state.b >= 1)) t.fail("bad entry " + key);
  });
  t.equal(seen, 1000);
});

t.test("eviction prefers the sampled state closest to expiry", async (t) => {
  const table = new StateTable(100, T0);
  // 99 long-lived keys and one about to expire: over many evictions the short one is hit far more often than 1/100.
  let shortEvicted = 0;
  // Every key counted one request (equal weight), so the earliest expiry decides. With 8
  // samples of 100 the short key is in the sample ~7.7% of evictions: ~77 of 1000, against
  // ~10 for a uniform choice. 25 is > 3 standard deviations from both.
  for (let round = 0; round < 1000; round++) {
    if (table.get("short") === undefined) decideN(table, "short", 1, 5, 1000, T0);
    for (let i = 0; table.size < 100; i++) decideN(table, `long${round}_${i}`, 1, 5, 3_600_000, T0);
    decideN(table, "new" + round, 1, 5, 3_600_000, T0);
    if (table.get("short") === undefined) shortEvicted++;
  }
  t.ok(shortEvicted > 25, `short-lived key evicted ${shortEvicted}/1000 times (uniform would be ~10)`);
});

t.test("set/get/delete round trip; deleting moves the last slot correctly", async (t) => {
  const table = new StateTable(10_000, T0);
  for (let i = 0; i < 3000; i++) table.set("k" + i, { a: i, b: i * 2, c: i * 3, expiresAt: 2_000_000_000 + i, origin: i + 1, born: 0 });
  for (let i = 0; i < 3000; i += 3) t.equal(table.delete("k" + i), true);
  t.equal(table.delete("k0"), false);
  t.equal(table.size, 2000);
  let ok = 0;
  for (let i = 0; i < 3000; i++) {
    const s = table.get("k" + i);
    if (i % 3 === 0) {
      if (s === undefined) ok++;
    } else if (s !== undefined && s.a === i && s.b === i * 2 && s.c === i * 3 && s.expiresAt === 2_000_000_000 + i && s.origin === i + 1) ok++;
  }
  t.equal(ok, 3000);
});

t.test("random operations keep the structure consistent (lists, index, slots)", async (t) => {
  const rnd = prng(12345);
  // Small enough that the table fills up between sweeps: evictions and expiries both happen.
  const table = new StateTable(60, T0);
  const out = newStep();
  let now = T0;
  for (let i = 0; i < 20_000; i++) {
    const r = rnd();
    const key = "k" + Math.floor(rnd() * 3000);
    if (r < 0.6) table.decide(key, ALGORITHMS[Math.floor(rnd() * 4)]!, 1 + Math.floor(rnd() * 5), (1 + Math.floor(rnd() * 20)) * 1000, now, out);
    else if (r < 0.7) table.delete(key);
    else if (r < 0.75) table.set(key, { a: now, b: 1, c: 0, expiresAt: Math.ceil(now / 1000) + Math.floor(rnd() * 30), origin: 5, born: 0 });
    else if (r < 0.8) now += Math.floor(rnd() * 1500);
    else table.sweep(now);
    const problem = table.checkInvariants();
    if (problem !== undefined) return void t.fail(`step ${i}: ${problem}`);
  }
  t.ok(table.evictions > 0 && table.expirations > 0, `consistent through ${table.evictions} evictions and ${table.expirations} expirations`);
});

t.test("trackChanges: each changed key once per take, through moves and growth; the first change of a round is announced once", async (t) => {
  const table = new StateTable(100_000, T0);
  let announced = 0;
  table.trackChanges(() => announced++);
  t.same(table.takeChanges(), [], "nothing yet");
  const out = newStep();
  for (let round = 0; round < 100; round++) for (let k = 0; k < 5; k++) table.decide(`k${k}`, fixedWindow, 1000, 60_000, T0, out);
  t.equal(announced, 1, "announced at the first change only");
  t.same(table.takeChanges().sort(), ["k0", "k1", "k2", "k3", "k4"], "500 changes of 5 keys: 5 keys");
  // Growth past the initial capacity, deletions that move the last slot, set() from elsewhere.
  for (let i = 0; i < 3000; i++) table.decide(`g${i}`, fixedWindow, 1000, 60_000, T0, out);
  table.takeChanges();
  table.delete("g0");
  table.decide("g2999", fixedWindow, 1000, 60_000, T0, out);
  table.decide("g2999", fixedWindow, 1000, 60_000, T0, out);
  table.set("x", { a: T0, b: 1, c: 0, expiresAt: 2_000_000_000, origin: 3, born: 0 });
  t.same(table.takeChanges(), ["g2999", "x"], "a moved slot is listed once; a set() is a change too");
  t.equal(announced, 3);
});

t.test("a table made with resettable: false (the replica table) keeps no identifier index: fewer bytes, no keysOf", async (t) => {
  const owned = new StateTable(10_000, T0);
  const copies = new StateTable(10_000, T0, Infinity, { resettable: false });
  for (let i = 0; i < 3000; i++) {
    const state = { a: T0, b: 1, c: 0, expiresAt: T0 / 1000 + 60, origin: 9, born: T0 / 1000 };
    owned.set(stateKeyOf(0, 60, ringKeyOf("ns", `u${i}`)), state);
    copies.set(stateKeyOf(0, 60, ringKeyOf("ns", `u${i}`)), state);
  }
  t.equal(copies.checkInvariants(), undefined, "consistent without it");
  // 4,096 slots of capacity: next, prev and hash (12 B) a slot, and 4,096 buckets of 4 B.
  t.equal(owned.bytes - copies.bytes, 4096 * 16, "16 bytes a slot of capacity fewer");
  t.throws(() => copies.keysOf(ringKeyOf("ns", "u1")), /resettable/, "keysOf says why it is not there");
  t.same(owned.keysOf(ringKeyOf("ns", "u1")), [stateKeyOf(0, 60, ringKeyOf("ns", "u1"))]);
  copies.delete(stateKeyOf(0, 60, ringKeyOf("ns", "u1")));
  t.equal(copies.get(stateKeyOf(0, 60, ringKeyOf("ns", "u1"))), undefined, "a copy is still removed by its state key");
  t.equal(copies.checkInvariants(), undefined);
});

t.test("above 65,536 slots the table grows by a quarter, every column carried over from one slab per step", async (t) => {
  const owned = new StateTable(1_000_000, T0);
  owned.trackChanges(() => {});
  const copies = new StateTable(1_000_000, T0, Infinity, { resettable: false });
  const key = (i: number) => stateKeyOf(0, 3600, ringKeyOf("ns", `u${i}`));
  const state = (i: number) => ({ a: T0 + i, b: i * 2, c: i % 7, expiresAt: T0 / 1000 + 3600 + (i % 50), origin: i + 1, born: i });
  let jump = 0;
  for (let i = 0; i < 110_000; i++) {
    const before = owned.bytes;
    owned.set(key(i), state(i), i);
    copies.set(key(i), state(i));
    // slot 102,401 is the first past a capacity of 102,400 (65,536 · 1.25²)
    if (i === 102_400) jump = owned.bytes - before - SlotCosts.of(key(i)) - 8;
  }
  // 25,600 slots more: 52 B of the table's columns, 4 of the change log, 4 of the key index's hashes, 12 of the identifier index's columns
  t.equal(jump, 25_600 * (52 + 4 + 4 + 12), "102,400 → 128,000 slots, a quarter more, each counted in bytes");
  // (checkInvariants is quadratic: the values below and the indexes' answers check the carrying over)
  t.equal(owned.size, 110_000);
  t.equal(copies.size, 110_000);
  for (const i of [0, 1, 1023, 1024, 65_535, 65_536, 81_920, 102_400, 109_999]) {
    t.same(owned.get(key(i)), state(i), `state ${i} carried over every growth step`);
    t.same(copies.get(key(i)), state(i), `copy ${i} too`);
  }
  t.equal(owned.takeChanges().length, 110_000, "the change log carried over too");
  t.same(owned.keysOf(ringKeyOf("ns", "u65536")), [key(65_536)], "and the identifier index");
});

t.test("a slab's columns do not overlap, the Float64 ones stay aligned, and it refuses what it was not made for", async (t) => {
  const slab = new Slab(5, 8 + 4 + 4);
  const u = widened(new Uint32Array([1, 2, 3]), 5, slab);
  const f = widened(new Float64Array([0.5]), 5, slab);
  const i = widened(new Int32Array([-1]), 5, slab);
  f.fill(1.5);
  i.fill(-7);
  t.same([...u], [1, 2, 3, 0, 0], "values copied, the rest zero, untouched by its neighbours");
  t.same([...f], [1.5, 1.5, 1.5, 1.5, 1.5]);
  t.equal(f.byteOffset % 8, 0, "a Float64 column after an odd 4-byte one starts on 8 bytes");
  t.throws(() => slab.take(Float64Array, 8), /beyond/, "no column past the bytes the slab was made for");
  t.throws(() => widened(new Uint32Array(1), 6, new Slab(5, 4)), /another capacity/);
});

t.test("a slab freed gives its bytes back at once: its columns read empty, the next step's keep every value", async (t) => {
  const old = new Slab(4, 8 + 4);
  const f = widened(new Float64Array([1, 2]), 4, old);
  const u = widened(new Uint32Array([7]), 4, old);
  const next = new Slab(5, 8 + 4);
  const f2 = widened(f, 5, next);
  const u2 = widened(u, 5, next);
  old.free();
  // Node 20 has no ArrayBuffer.prototype.transfer: there the GC frees it, and the columns stay readable
  const detaches = typeof (ArrayBuffer.prototype as { transfer?: unknown }).transfer === "function";
  t.equal(f.length, detaches ? 0 : 4, "the freed step's columns are detached");
  t.equal(u.buffer.byteLength, detaches ? 0 : old.capacity * 12 + 12);
  t.same([...f2], [1, 2, 0, 0, 0], "the columns carried over are untouched");
  t.same([...u2], [7, 0, 0, 0, 0]);
});

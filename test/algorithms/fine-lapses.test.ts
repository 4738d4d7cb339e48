/**
 * The fine overlay of a concurrency state (src/algorithms/fine-lapses.ts), clock passed in:
 * a lease lapses in its own second, D to D + 1 s after it was taken, while the five bucket
 * counts stay a conservative projection: read through any overlay that refines them, never
 * fewer slots are held than are truly held (checked against a model that tracks every lease).
 */
import t from "tap";
import { bucketMs, concurrency, heldAt } from "../../src/algorithms/concurrency.js";
import { acquireFine, emptyFine, fineHeldAt, mergeFine, refines, releaseFine, releaseOldestFine, type FineLapses } from "../../src/algorithms/fine-lapses.js";
import { newStep, type LimitState } from "../../src/algorithms/index.js";
import { prng } from "./properties.js";

const T0 = 1_800_000_000_000;
const ZERO: LimitState = { a: 0, b: 0, c: 0 };

/** A key as an owner holds it: the bucket state and its overlay. */
class Key {
  state: LimitState = { ...ZERO };
  fine: FineLapses = emptyFine();
  constructor(
    readonly limit: number,
    readonly D: number,
    readonly maxEntries = 1_000_000,
  ) {}
  acquire(now: number, cost = 1) {
    const out = newStep();
    const leaseS = acquireFine(this.state, this.fine, this.limit, this.D, now, out, cost, this.maxEntries);
    if (out.allowed && cost > 0) this.state = { a: out.a, b: out.b, c: out.c };
    return { ...out, leaseS };
  }
  release(leaseS: number, now: number): boolean {
    const out = { ...ZERO };
    const freed = releaseFine(this.state, this.fine, leaseS, this.D, now, out);
    if (freed) this.state = out;
    return freed;
  }
  releaseOldest(n: number, now: number): number {
    const out = { ...ZERO };
    const k = releaseOldestFine(this.state, this.fine, this.D, now, out, n);
    this.state = out;
    return k;
  }
  held(now: number): number {
    return fineHeldAt(this.state, this.fine, this.D, now);
  }
}

t.test("a 30 s lease lapses 30 to 31 s after it was taken, not up to 38 s", async (t) => {
  const D = 30_000;
  t.equal(bucketMs(D), 8_000, "its bucket is 8 s wide");
  for (const offset of [0, 1, 999, 1000, 4_500, 7_999]) {
    const k = new Key(1, D);
    const at = T0 + offset;
    const a = k.acquire(at);
    t.ok(a.allowed);
    t.ok(a.leaseS * 1000 >= at + D && a.leaseS * 1000 < at + D + 1000, `taken at +${offset}: lapses at +${a.leaseS * 1000 - at} ms`);
    t.equal(a.resetMs, Math.ceil((at + D) / 8_000) * 8_000, "reset (the state's expiry): its bucket's end");
    const full = k.acquire(at + 10);
    t.notOk(full.allowed);
    t.equal(full.retryAfterMs, a.leaseS * 1000 - (at + 10), "retry_after: until that second");
    t.equal(k.held(a.leaseS * 1000 - 1), 1, "held a millisecond before");
    t.equal(k.held(a.leaseS * 1000), 0, "free at its second, though its bucket still counts it");
    t.ok(heldAt(k.state, D, a.leaseS * 1000) <= 1, "the bucket counts are untouched: the coarse reading");
    t.ok(k.acquire(a.leaseS * 1000).allowed, "and taken again");
  }
});

t.test("retry_after: the next slot to free, an entry's second or a bucket's end for slots without one", async (t) => {
  const D = 30_000;
  const k = new Key(3, D, 2);
  const a = k.acquire(T0); // lapse T0 + 30 s
  const b = k.acquire(T0 + 2_500); // lapse T0 + 33 s
  const c = k.acquire(T0 + 3_600); // a third second: no room for an entry, counted to its bucket's end
  t.equal(a.leaseS, (T0 + 30_000) / 1000);
  t.equal(b.leaseS, (T0 + 33_000) / 1000);
  t.equal(c.leaseS * 1000, T0 + 40_000, "no entry: the lease names its bucket's end");
  const full = k.acquire(T0 + 4_000);
  t.equal(full.retryAfterMs, 26_000, "until a's second");
  t.ok(k.release(a.leaseS, T0 + 4_000));
  t.ok(k.acquire(T0 + 4_000).allowed, "a's slot taken again, with an entry (a's is gone)");
  const again = k.acquire(T0 + 4_100);
  t.equal(again.retryAfterMs, 33_000 - 4_100, "until b's second, the oldest now");
  t.equal(again.resetMs, c.leaseS * 1000, "reset: the last bucket's end");
});

t.test("property: never fewer held than truly held; exactly as many when every slot has an entry", async (t) => {
  for (const [seed, D, limit, maxEntries] of [
    [1, 30_000, 5, 1_000_000],
    [2, 4_000, 3, 1_000_000],
    [3, 60_000, 20, 1_000_000],
    [4, 30_000, 8, 3],
    [5, 1_000, 2, 1_000_000],
    [6, 10_000, 4, 1],
  ] as const) {
    const rnd = prng(seed);
    const k = new Key(limit, D, maxEntries);
    /** every lease taken and not freed: its true lapse (its own second) and its lease second */
    let leases: { lapse: number; leaseS: number }[] = [];
    let now = T0 + Math.floor(rnd() * 10_000);
    let exact = true;
    let mismatches = 0;
    for (let i = 0; i < 3_000; i++) {
      now += Math.floor(rnd() * 1_500);
      leases = leases.filter((l) => l.lapse > now);
      const truly = leases.length;
      const held = k.held(now);
      if (held < truly) t.fail(`seed ${seed} step ${i}: ${held} held, ${truly} truly`);
      if (held !== truly) mismatches++;
      const r = rnd();
      if (r < 0.5) {
        const a = k.acquire(now);
        if (a.allowed !== truly < limit && held === truly) t.fail(`seed ${seed} step ${i}: allowed ${a.allowed} with ${truly} of ${limit}`);
        if (a.allowed) {
          if (a.leaseS * 1000 !== Math.ceil((now + D) / 1000) * 1000) exact = false;
          leases.push({ lapse: Math.ceil((now + D) / 1000) * 1000, leaseS: a.leaseS });
        } else if (held === truly && maxEntries >= limit) {
          const next = leases.map((l) => l.lapse).sort((p, q) => p - q)[truly - limit]!;
          if (a.retryAfterMs !== next - now) t.fail(`seed ${seed} step ${i}: retry_after ${a.retryAfterMs}, next lapse in ${next - now}`);
        }
      } else if (r < 0.8 && leases.length > 0) {
        const at = Math.floor(rnd() * leases.length);
        if (!k.release(leases[at]!.leaseS, now)) t.fail(`seed ${seed} step ${i}: a held lease freed nothing`);
        leases.splice(at, 1);
      } else if (r < 0.85 && leases.length > 0) {
        leases.sort((p, q) => p.lapse - q.lapse);
        t.equal(k.releaseOldest(1, now), 1);
        leases.shift();
      }
      if (!refines(k.state, k.fine, D, now)) t.fail(`seed ${seed} step ${i}: the overlay no longer refines its state`);
    }
    if (maxEntries >= limit) {
      t.ok(exact, `D ${D}: every lease named its own second`);
      t.equal(mismatches, 0, `D ${D}, limit ${limit}: held exactly as truly held at every step`);
    } else t.ok(mismatches > 0, `D ${D}, ${maxEntries} entries: slots without one are held to their bucket's end (${mismatches} steps over)`);
  }
});

t.test("an overlay lost or stale holds slots longer, never fewer", async (t) => {
  const D = 30_000;
  const k = new Key(2, D);
  const a = k.acquire(T0 + 500);
  k.acquire(T0 + 600);
  t.ok(refines(k.state, emptyFine(), D, T0 + 700), "no overlay refines any state");
  t.equal(fineHeldAt(k.state, emptyFine(), D, a.leaseS * 1000), 2, "without it, both held until their bucket ends");
  // A release that did not go through the overlay (old code, a peer's state) makes it unsafe.
  const coarse = { ...ZERO };
  const stale = k.fine;
  concurrency.refund(k.state, 1, T0 + 500, D, T0 + 800, coarse);
  t.notOk(refines(coarse, stale, D, T0 + 800), "a bucket counting fewer than the overlay saw: dropped");
  const more = newStep();
  concurrency.step(k.state, 3, D, T0 + 900, more);
  t.ok(refines(more, stale, D, T0 + 900), "a bucket counting more (a merge's additions) keeps it");
});

t.test("merges: disjoint holders add, copies take each bucket whole from one copy", async (t) => {
  const D = 30_000;
  const x = new Key(10, D);
  const y = new Key(10, D);
  const xa = x.acquire(T0);
  const ya = y.acquire(T0 + 1_200);
  const out = { ...ZERO };
  const f = mergeFine(x.state, x.fine, y.state, y.fine, D, T0 + 2_000, false, out);
  t.ok(refines(out, f, D, T0 + 2_000));
  t.equal(fineHeldAt(out, f, D, xa.leaseS * 1000), 1, "x's slot lapsed in its second, y's held");
  t.equal(fineHeldAt(out, f, D, ya.leaseS * 1000), 0);

  // A replica copy behind the owner by one release: the merge keeps the slot held (the larger count).
  const owner = new Key(10, D);
  const l1 = owner.acquire(T0);
  owner.acquire(T0 + 100);
  const replica = { state: { ...owner.state }, fine: { ...owner.fine, s: [...owner.fine.s], m: [...owner.fine.m] } };
  owner.release(l1.leaseS, T0 + 200);
  const c = { ...ZERO };
  const fc = mergeFine(owner.state, owner.fine, replica.state, replica.fine, D, T0 + 300, true, c);
  t.ok(refines(c, fc, D, T0 + 300));
  t.equal(fineHeldAt(c, fc, D, T0 + 300), 2, "the release the copy had not seen stays held");
  t.equal(fineHeldAt(c, fc, D, Math.ceil((T0 + 30_100) / 1000) * 1000), 0, "until it lapses, in its own second");
  const n = { ...ZERO };
  const fn = mergeFine(replica.state, null, owner.state, owner.fine, D, T0 + 300, true, n);
  t.ok(refines(n, fn, D, T0 + 300));
  t.ok(fineHeldAt(n, fn, D, T0 + 30_500) >= 1, "a copy without an overlay: its bucket's slots unknown, held to the end");
});

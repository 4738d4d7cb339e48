import t from "tap";
import { bucketMs, concurrency as alg, heldAt, lapseOf, MAX_BUCKET_COUNT, releaseLease, releaseOldest } from "../../src/algorithms/concurrency.js";
import type { LimitState } from "../../src/algorithms/index.js";
import { apply, run } from "./properties.js";

const D = 60_000; // a 60 s lease: buckets of 15 s
const T0 = 1_800_000_000_000; // a multiple of 15 s and of 60 s

/** Acquire `n` slots one by one at `now`; the state after, and each lease's lapse. */
function acquire(state: LimitState | null, n: number, limit: number, now: number, d = D): { state: LimitState | null; lapses: number[] } {
  const lapses: number[] = [];
  for (let i = 0; i < n; i++) {
    const s = run(alg, state, limit, d, now);
    if (!s.allowed) break;
    lapses.push(s.resetMs);
    state = apply(state, s);
  }
  return { state, lapses };
}

t.test("the bucket width is a quarter of the lease lifetime, rounded up to whole seconds", async (t) => {
  t.equal(bucketMs(60_000), 15_000);
  t.equal(bucketMs(1_000), 1_000);
  t.equal(bucketMs(10_000), 3_000);
  t.equal(bucketMs(31_536_000_000), 7_884_000_000);
});

t.test("a lease lapses at least `duration` and less than duration + W after it was acquired", async (t) => {
  for (const d of [1_000, 3_000, 10_000, 60_000, 86_400_000]) {
    const W = bucketMs(d);
    for (const offset of [0, 1, 999, 1000, W - 1, W, W + 1]) {
      const now = T0 + offset;
      const lapse = lapseOf(now, d);
      t.ok(lapse >= now + d && lapse < now + d + W, `D ${d}, acquired at +${offset}: lapses ${lapse - now} ms later`);
      t.equal(lapse % 1000, 0, "on a whole second");
      const s = run(alg, null, 1, d, now);
      t.equal(s.resetMs, lapse, "the answer's reset is that lapse");
    }
  }
});

t.test("admits exactly `limit` holders; the 429 waits for the earliest lapse", async (t) => {
  let { state, lapses } = acquire(null, 3, 3, T0 + 1000);
  t.same(lapses, [T0 + 75_000, T0 + 75_000, T0 + 75_000]);
  const later = T0 + 20_000; // these three lapse at +75 s; a fourth asks at +20 s
  const blocked = run(alg, state, 3, D, later);
  t.equal(blocked.allowed, false);
  t.equal(blocked.remaining, 0);
  t.equal(blocked.retryAfterMs, T0 + 75_000 - later, "retry_after: until the earliest held lease lapses");
  // One more at +20 s after one release: it lapses in the bucket of +90 s.
  const freed: LimitState = { a: 0, b: 0, c: 0 };
  t.equal(releaseLease(state!, 1, lapses[0]!, D, later, freed), true);
  const s = run(alg, freed, 3, D, later);
  t.equal(s.allowed, true);
  t.equal(s.remaining, 0);
  t.equal(s.resetMs, T0 + 90_000);
  state = apply(freed, s);
  // The 429 now waits for the two of +75 s only when both must go: cost 1 needs one, at +75 s.
  t.equal(run(alg, state, 3, D, later).retryAfterMs, 55_000);
  t.equal(run(alg, state, 3, D, later, 3).retryAfterMs, 70_000, "all three free only at +90 s");
  // At the lapse, the two of +75 s are free; at +90 s all are.
  t.equal(heldAt(state, D, T0 + 74_999), 3);
  t.equal(heldAt(state, D, T0 + 75_000), 1);
  t.equal(heldAt(state, D, T0 + 90_000), 0);
  t.equal(run(alg, state, 3, D, T0 + 75_000).remaining, 1, "two lapsed, one held, one acquired");
});

t.test("count and remaining: held and free slots", async (t) => {
  const { state } = acquire(null, 4, 10, T0);
  const peek = run(alg, state, 10, D, T0 + 5, 0);
  t.equal(peek.allowed, true);
  t.equal(peek.remaining, 6, "a peek counts nothing");
  const s = run(alg, state, 10, D, T0 + 5, 3);
  t.equal(s.remaining, 3, "a cost of 3 holds three slots");
  const over = run(alg, apply(state, s), 10, D, T0 + 5, 4);
  t.equal(over.allowed, false);
  t.equal(over.remaining, 0, "a 429 allows nothing now");
});

t.test("a release frees one slot of its bucket; a lapsed lease frees nothing", async (t) => {
  const first = acquire(null, 2, 5, T0);
  const second = acquire(first.state, 2, 5, T0 + 20_000);
  const state = second.state!;
  t.equal(heldAt(state, D, T0 + 20_000), 4);
  const out: LimitState = { a: 0, b: 0, c: 0 };
  t.equal(releaseLease(state, 1, second.lapses[0]!, D, T0 + 21_000, out), true);
  t.equal(heldAt(out, D, T0 + 21_000), 3);
  t.equal(heldAt(out, D, T0 + 60_000), 1, "the first two lapsed on time, one of the second two is held");
  // The first leases lapsed at +60 s: releasing one then frees nothing (idempotent).
  const after: LimitState = { a: 0, b: 0, c: 0 };
  t.equal(releaseLease(out, 1, first.lapses[0]!, D, T0 + 60_000, after), false);
  t.equal(heldAt(after, D, T0 + 60_000), 1);
  // A bucket that holds nothing gives nothing, so a release can never free more than was held there.
  const empty: LimitState = { a: 0, b: 0, c: 0 };
  t.equal(releaseLease(out, 1, second.lapses[0]! + 30_000, D, T0 + 21_000, empty), false);
});

t.test("releaseOldest frees the slots that would lapse first", async (t) => {
  const first = acquire(null, 1, 5, T0);
  const second = acquire(first.state, 2, 5, T0 + 20_000);
  const out: LimitState = { a: 0, b: 0, c: 0 };
  t.equal(releaseOldest(second.state!, D, T0 + 30_000, out), 1);
  t.equal(heldAt(out, D, T0 + 30_000), 2);
  t.equal(releaseLease(out, 1, first.lapses[0]!, D, T0 + 30_000, { a: 0, b: 0, c: 0 }), false, "the oldest lease's bucket is empty now");
  t.equal(releaseOldest(out, D, T0 + 30_000, out, 5), 2, "only what is held");
  t.equal(releaseOldest(out, D, T0 + 30_000, out), 0, "nothing held: nothing freed");
});

t.test("a million slots stay three numbers", async (t) => {
  const limit = 1_000_000;
  const s = run(alg, null, limit, D, T0, limit);
  t.equal(s.allowed, true);
  t.equal(s.remaining, 0);
  const state = apply(null, s, limit)!;
  for (const v of [state.a, state.b, state.c]) t.ok(Number.isSafeInteger(v), "exact integers");
  t.equal(run(alg, state, limit, D, T0 + 1).allowed, false);
  t.equal(heldAt(state, D, T0 + 59_999), limit, "held until the lapse");
  t.equal(heldAt(state, D, T0 + 60_000), 0, "and free from it on");
});

t.test("merge adds holders of disjoint histories; copies keep the larger count per bucket", async (t) => {
  const x = acquire(null, 2, 10, T0).state!;
  const y = acquire(null, 3, 10, T0 + 20_000).state!;
  const out: LimitState = { a: 0, b: 0, c: 0 };
  alg.merge(x, y, D, T0 + 20_000, out);
  t.equal(heldAt(out, D, T0 + 20_000), 5);
  alg.mergeCopies(x, y, D, T0 + 20_000, out);
  t.equal(heldAt(out, D, T0 + 20_000), 5, "different buckets: both kept");
  const x2 = acquire(x, 1, 10, T0).state!;
  alg.mergeCopies(x, x2, D, T0 + 1, out);
  t.equal(heldAt(out, D, T0 + 1), 3, "the same bucket: the larger count, not the sum");
  alg.mergeCopies(out, x2, D, T0 + 1, out);
  t.equal(heldAt(out, D, T0 + 1), 3, "idempotent");
  // Clamped: a bucket never holds more than 2^20 − 1.
  const big = apply(null, run(alg, null, 1_000_000, D, T0, 1_000_000), 1_000_000)!;
  alg.merge(big, big, D, T0, out);
  t.equal(heldAt(out, D, T0), MAX_BUCKET_COUNT);
});

t.test("ages carry held slots across clocks: never earlier, at most one bucket later", async (t) => {
  const { state, lapses } = acquire(null, 2, 5, T0 + 3_000);
  const aged: LimitState = { a: 0, b: 0, c: 0 };
  alg.toAges(state!, T0 + 10_000, aged);
  t.equal(alg.checkAged({ ...aged }, D, { maxLimit: 1_000_000, maxDurationMs: 31_536_000_000, ageToleranceMs: 1000 }), "ok");
  for (const skew of [-2_500, -1, 0, 1, 700, 14_999]) {
    const back: LimitState = { a: 0, b: 0, c: 0 };
    const now = T0 + 10_000 + skew;
    alg.fromAges(aged, D, now, back);
    t.equal(heldAt(back, D, now), 2, `skew ${skew}: both held`);
    const lapseHere = alg.expiresAt(back, 5, D);
    const lapseThere = lapses[0]! + skew;
    if (Math.abs(skew) <= 700) t.equal(lapseHere, lapses[0], `skew ${skew}: clocks nearly in step keep the lapse exactly`);
    t.ok(
      lapseHere >= lapseThere - 1000 && lapseHere < lapseThere + bucketMs(D) + 1000,
      `skew ${skew}: lapses ${lapseHere - lapseThere} ms from where it would`,
    );
  }
  const expired: LimitState = { a: 0, b: 0, c: 0 };
  alg.toAges(state!, T0 + 80_000, expired);
  t.equal(alg.checkAged(expired, D, { maxLimit: 1_000_000, maxDurationMs: 31_536_000_000, ageToleranceMs: 1000 }), "expired");
  const forged = { a: -1, b: 0, c: 0 };
  t.equal(alg.checkAged(forged, D, { maxLimit: 1_000_000, maxDurationMs: 31_536_000_000, ageToleranceMs: 1000 }), "invalid");
  const farAhead = { a: 0, b: 0, c: -3600 * 2 ** 20 + 1 };
  t.equal(
    alg.checkAged(farAhead, D, { maxLimit: 1_000_000, maxDurationMs: 31_536_000_000, ageToleranceMs: 1000 }),
    "invalid",
    "a lapse an hour ahead of a 60 s lease",
  );
});

t.test("refund gives back what a reservation counted at `countedAt`", async (t) => {
  const { state } = acquire(null, 2, 5, T0 + 1_000);
  const out: LimitState = { a: 0, b: 0, c: 0 };
  alg.refund(state!, 1, T0 + 1_000, D, T0 + 2_000, out);
  t.equal(heldAt(out, D, T0 + 2_000), 1);
});

t.test("random acquire, release and lapse sequences never admit more than `limit` held at once", async (t) => {
  let seed = 7;
  const rnd = () => (seed = (seed * 48271) % 0x7fffffff) / 0x7fffffff;
  for (let run_ = 0; run_ < 50; run_++) {
    const limit = 1 + Math.floor(rnd() * 8);
    const d = 1000 * (1 + Math.floor(rnd() * 20));
    let now = T0 + Math.floor(rnd() * 100_000);
    let state: LimitState | null = null;
    const holders: number[] = []; // the lapse of each lease held, exactly
    for (let i = 0; i < 200; i++) {
      now += Math.floor(rnd() * d * 0.3);
      for (let k = holders.length - 1; k >= 0; k--) if (holders[k]! <= now) holders.splice(k, 1);
      if (rnd() < 0.35 && holders.length > 0) {
        const k = Math.floor(rnd() * holders.length);
        const out: LimitState = { a: 0, b: 0, c: 0 };
        if (!releaseLease(state!, 1, holders[k]!, d, now, out)) t.fail(`a held lease was not released (run ${run_} step ${i})`);
        holders.splice(k, 1);
        state = out;
      } else {
        const s = run(alg, state, limit, d, now);
        if (s.allowed !== holders.length < limit) return void t.fail(`allowed ${s.allowed} with ${holders.length} of ${limit} held (run ${run_} step ${i})`);
        if (s.allowed) {
          holders.push(s.resetMs);
          state = apply(state, s);
          if (s.remaining !== limit - holders.length) return void t.fail("remaining is the free slots");
        } else {
          const earliest = Math.min(...holders);
          if (s.retryAfterMs !== earliest - now) return void t.fail(`retry ${s.retryAfterMs}, earliest lapse in ${earliest - now}`);
        }
      }
      if (heldAt(state, d, now) !== holders.length) return void t.fail(`held ${heldAt(state, d, now)}, expected ${holders.length}`);
    }
  }
  t.pass("exact over 50 × 200 steps");
});

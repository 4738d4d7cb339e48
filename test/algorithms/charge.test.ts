/**
 * Algorithm.charge: debt and refunds (docs/api.md, POST /limit/charge). Random sequences of
 * checks (step), charges and refunds with the injected clock, checked on every step:
 *  - a charge of c counts exactly c more (`used` before + c), whatever remained, up to the
 *    debt bound; a refund never takes `used` below zero nor a bucket above full;
 *  - `allowed` (OK over RLS) exactly when what is counted is not past the limit;
 *  - `remaining` is how many requests of 1 are admitted now (0 in debt), and `retryAfterMs`
 *    is exact to the millisecond: blocked 1 ms before it, allowed at it;
 *  - at `resetMs` the key admits its whole limit again, 1 ms before it does not;
 *  - checks made in debt (step) keep their own invariants: blocked, exact retry.
 */
import t from "tap";
import { ALGORITHMS, newStep, type Algorithm, type LimitState, type Step } from "../../src/algorithms/index.js";
import { admitsNow, apply, prng, run } from "./properties.js";

function charged(alg: Algorithm, state: LimitState | null, limit: number, D: number, now: number, cost: number): Step {
  const out = newStep();
  alg.charge(state, limit, D, now, out, cost);
  return out;
}

const stateOf = (s: Step): LimitState => ({ a: s.a, b: s.b, c: s.c });

/** How far `used` may go: a window's count saturates far away; a token bucket owes one bucket, a leaky one holds two. */
function maxUsed(alg: Algorithm, limit: number): number {
  return alg.name === "token-bucket" ? 2 * limit : alg.name === "leaky-bucket" ? 2 * limit : Infinity;
}

for (const alg of ALGORITHMS) {
  t.test(`${alg.name}: debt and refunds over random check/charge/refund sequences`, async (t) => {
    let steps = 0;
    let inDebt = 0;
    let refunds = 0;
    let checks = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const rnd = prng(seed * 7727 + alg.code);
      const limit = 1 + Math.floor(rnd() * 25);
      const D = (1 + Math.floor(rnd() * 90)) * 1000;
      let now = 1_700_000_000_000 + Math.floor(rnd() * 10_000_000);
      let state: LimitState | null = null;
      for (let step = 0; step < 50; step++) {
        const r = rnd();
        if (r < 0.4) now += Math.floor(rnd() * (D / limit));
        else if (r < 0.55) now += Math.floor(rnd() * D * 2);
        const where = `seed ${seed} step ${step} (${alg.name}, limit ${limit}, D ${D})`;
        steps++;
        const kind = rnd();
        if (kind < 0.3) {
          // A check of 1 (POST /limit): in debt it is blocked with an exact retry.
          checks++;
          const s = run(alg, state, limit, D, now, 1);
          if (s.allowed) state = apply(state, s);
          else {
            if (!(s.retryAfterMs > 0) || s.remaining !== 0) return void t.fail(`blocked with retry ${s.retryAfterMs}, remaining ${s.remaining}: ${where}`);
            if (run(alg, state, limit, D, now + s.retryAfterMs - 1).allowed) return void t.fail(`allowed 1 ms before retry: ${where}`);
            if (!run(alg, state, limit, D, now + s.retryAfterMs).allowed) return void t.fail(`blocked at retry: ${where}`);
          }
          continue;
        }
        const u = rnd();
        const cost = u < 0.15 ? 0 : u < 0.4 ? -(1 + Math.floor(rnd() * 3 * limit)) : 1 + Math.floor(rnd() * 3 * limit);
        const before = charged(alg, state, limit, D, now, 0).used;
        const s = charged(alg, state, limit, D, now, cost);
        const after = stateOf(s);
        if (cost > 0 && s.used !== Math.min(before + cost, maxUsed(alg, limit))) return void t.fail(`charge ${cost}: used ${before} → ${s.used}: ${where}`);
        if (cost < 0) {
          refunds++;
          if (s.used < Math.max(0, before + cost) || s.used > before) return void t.fail(`refund ${-cost}: used ${before} → ${s.used}: ${where}`);
          if (alg.name !== "sliding-window" && s.used !== Math.max(0, before + cost))
            return void t.fail(`refund ${-cost}: used ${before} → ${s.used}: ${where}`);
        }
        if (cost === 0 && s.used !== before) return void t.fail(`a check counted: ${where}`);
        if (s.allowed !== s.used <= limit) return void t.fail(`allowed ${s.allowed} with ${s.used} of ${limit} used: ${where}`);
        if (s.used > limit) inDebt++;
        const admits = admitsNow(alg, after, limit, D, now);
        if (s.remaining !== admits) return void t.fail(`remaining ${s.remaining} but ${admits} admitted: ${where}`);
        if (s.remaining > 0 && s.retryAfterMs !== 0) return void t.fail(`retry with room left: ${where}`);
        if (s.remaining === 0) {
          if (!(s.retryAfterMs > 0) || !Number.isInteger(s.retryAfterMs)) return void t.fail(`retry ${s.retryAfterMs}: ${where}`);
          if (run(alg, after, limit, D, now + s.retryAfterMs - 1).allowed) return void t.fail(`allowed 1 ms before retry: ${where}`);
          if (!run(alg, after, limit, D, now + s.retryAfterMs).allowed) return void t.fail(`blocked at retry: ${where}`);
        }
        if (admitsNow(alg, after, limit, D, s.resetMs) !== limit) return void t.fail(`not full at reset: ${where}`);
        if (s.resetMs > now && admits < limit && admitsNow(alg, after, limit, D, s.resetMs - 1) === limit)
          return void t.fail(`full 1 ms before reset: ${where}`);
        if (alg.name !== "sliding-window" && alg.expiresAt(after, limit, D) > s.resetMs) return void t.fail(`expires after reset: ${where}`);
        // What the table stores: a charge of 0, or a refund of nothing, stores nothing.
        if (cost !== 0 && !(cost < 0 && state === null)) state = after;
      }
    }
    t.ok(inDebt > steps / 20 && refunds > steps / 10 && checks > steps / 5, `${steps} steps: ${inDebt} in debt, ${refunds} refunds, ${checks} checks`);
  });

  t.test(`${alg.name}: a refund never takes a key below zero nor a bucket above full`, async (t) => {
    const D = 60_000;
    const T0 = 1_800_000_000_000;
    const s = charged(alg, stateOf(charged(alg, null, 10, D, T0, 3)), 10, D, T0 + 10, -1_000_000_000);
    t.equal(s.used, 0);
    t.equal(s.remaining, 10);
    t.equal(admitsNow(alg, stateOf(s), 10, D, T0 + 10), 10, "exactly the limit, not more");
  });
}

const [fixedWindow, slidingWindow, tokenBucket, leakyBucket] = ALGORITHMS as [Algorithm, Algorithm, Algorithm, Algorithm];
const T = 1_800_000_000_000; // a multiple of 60 s: windows start here

t.test("token bucket of 1,000 per 60 s charged 1,500: the next request of 1 passes after 30.06 s, not before", async (t) => {
  const s = charged(tokenBucket, null, 1000, 60_000, T, 1500);
  t.equal(s.allowed, false, "past the limit");
  t.equal(s.used, 1500);
  t.equal(s.remaining, 0);
  t.equal(s.retryAfterMs, 30_060);
  const after = stateOf(s);
  t.equal(run(tokenBucket, after, 1000, 60_000, T + 30_059).allowed, false);
  t.equal(run(tokenBucket, after, 1000, 60_000, T + 30_060).allowed, true);
  t.equal(s.resetMs, T + 90_000, "full again once 1,500 tokens have refilled");
});

t.test("leaky bucket of 1,000 per 60 s charged 1,500: the same 30.06 s (the dual of the token bucket)", async (t) => {
  const s = charged(leakyBucket, null, 1000, 60_000, T, 1500);
  t.equal(s.retryAfterMs, 30_060);
  t.equal(s.resetMs, T + 90_000);
});

t.test("fixed window of 1,000 per minute charged 50,000: in debt until the window ends, then a fresh window", async (t) => {
  const s = charged(fixedWindow, null, 1000, 60_000, T + 10_000, 50_000);
  t.same([s.allowed, s.used, s.remaining, s.retryAfterMs, s.resetMs], [false, 50_000, 0, 50_000, T + 60_000]);
  const check = charged(fixedWindow, stateOf(s), 1000, 60_000, T + 59_999, 0);
  t.equal(check.allowed, false, "a check (0 hits) is over while the count is past the limit");
  const next = charged(fixedWindow, stateOf(s), 1000, 60_000, T + 60_000, 0);
  t.same([next.allowed, next.used, next.remaining], [true, 0, 1000]);
});

t.test("a check (0 hits) at exactly the limit is OK; one past it is over", async (t) => {
  for (const alg of ALGORITHMS) {
    const full = stateOf(charged(alg, null, 10, 60_000, T, 10));
    const at = charged(alg, full, 10, 60_000, T, 0);
    t.same([at.allowed, at.used, at.remaining], [true, 10, 0], `${alg.name}: at the limit`);
    t.ok(at.retryAfterMs > 0, `${alg.name}: yet a request of 1 must wait`);
    const past = charged(alg, full, 10, 60_000, T, 1);
    t.same([past.allowed, past.used], [false, 11], `${alg.name}: past it`);
  }
});

t.test("sliding window: debt is held in the weighted estimate and fades with the previous window's weight", async (t) => {
  const s = charged(slidingWindow, null, 100, 60_000, T, 300);
  // Next window at 30 s: the estimate is 300 × 0.5 = 150, still past 100; at 40 s 300 × 1/3 = 100, at the limit.
  t.same(charged(slidingWindow, stateOf(s), 100, 60_000, T + 90_000, 0).used, 150);
  t.equal(charged(slidingWindow, stateOf(s), 100, 60_000, T + 100_000, 0).allowed, true);
  // A request of 1 needs 300 × (60 − e)/60 ≤ 99: e ≥ 40.2 s.
  t.equal(s.retryAfterMs, 60_000 + 40_200);
});

import t from "tap";
import type { LimitKey, Sample } from "./load.js";
import { tally } from "./tally.js";

// The fault suite's yardstick, checked on answers whose over-admission is known.

const fw: LimitKey = { identifier: "a", algorithm: "fixed-window", limit: 2, durationS: 60 };
const tb: LimitKey = { identifier: "a", algorithm: "token-bucket", limit: 2, durationS: 60 };
const T0 = 1_800_000_000_000; // a window start (divisible by 60 s)

function answer(key: number, at: number, status: number, extra: Partial<Sample> = {}): Sample {
  return { sentAt: at, doneAt: at + 1, node: 0, key, status, degraded: false, resetTime: undefined, count: undefined, error: undefined, ...extra };
}

t.test("fixed window: allowed beyond the limit per window, exact answers placed by reset_time, degraded by the client's clock", async (t) => {
  const end = T0 / 1000 + 60;
  const samples = [
    answer(0, T0 + 1, 200, { resetTime: end, count: 1 }),
    answer(0, T0 + 2, 200, { resetTime: end, count: 2 }),
    answer(0, T0 + 3, 429, { resetTime: end }),
    answer(0, T0 + 4, 200, { degraded: true, resetTime: end + 30 }), // fail-open: now + duration
    answer(0, T0 + 5, 200, { resetTime: end, count: 1 }), // a split brain's second count
    answer(0, T0 + 60_000, 200, { resetTime: end + 60, count: 1 }), // next window: fresh
  ];
  const r = tally(samples, [fw]);
  t.same(r.fixedWindow, { overAdmitted: 2, worst: 2, undegraded: 1, worstUndegraded: 1 }, "the degraded answer is over, not undegraded");
  t.equal(r.degraded, 1);
  t.equal(r.countedWithoutExactAnswer, 0);
});

t.test("fixed window: a count that climbs past the exact answers was counted without one", async (t) => {
  const end = T0 / 1000 + 60;
  const samples = [
    answer(0, T0 + 1, 200, { resetTime: end, count: 1 }),
    answer(0, T0 + 2, 200, { degraded: true }),
    answer(0, T0 + 3, 200, { resetTime: end, count: 3 }),
  ];
  t.equal(tally(samples, [{ ...fw, limit: 5 }]).countedWithoutExactAnswer, 1);
});

t.test("fixed window: a count carried into a window another node names (a hand-off between skewed clocks) is not a degraded answer counted", async (t) => {
  const end = T0 / 1000 + 60;
  const samples = [
    answer(0, T0 + 1, 200, { resetTime: end + 60, count: 1 }), // the owner, 30 s ahead, is in the next window
    answer(0, T0 + 2, 200, { resetTime: end + 60, count: 2 }),
    answer(0, T0 + 3, 200, { resetTime: end, count: 3 }), // handed over: the receiver's window, with the count
  ];
  t.equal(tally(samples, [{ ...fw, limit: 5 }]).countedWithoutExactAnswer, 0);
});

t.test("fixed window: requests of cost c count c units of the limit, undegraded ones apart", async (t) => {
  const end = T0 / 1000 + 60;
  const key: LimitKey = { ...fw, limit: 8, cost: 4 };
  const samples = [
    answer(0, T0 + 1, 200, { resetTime: end, count: 4 }),
    answer(0, T0 + 2, 200, { resetTime: end, count: 8 }),
    answer(0, T0 + 3, 200, { degraded: true }),
    answer(0, T0 + 4, 200, { resetTime: end, count: 4 }), // a second count: 4 beyond the limit, undegraded
    answer(0, T0 + 5, 429, { resetTime: end }),
  ];
  const r = tally(samples, [key]);
  t.same(r.fixedWindow, { overAdmitted: 8, worst: 8, undegraded: 4, worstUndegraded: 4 });
  t.same(r.keys, { fixedWindow: 1, tokenBucket: 0 });
});

t.test("fixed window: a key that shares answer has no 'counted without an exact answer' (its owner's count holds shares and grants)", async (t) => {
  const end = T0 / 1000 + 60;
  const key: LimitKey = { ...fw, limit: 2048, cost: 2, shared: true };
  const samples = [answer(0, T0 + 1, 200, { degraded: true }), answer(0, T0 + 2, 200, { resetTime: end, count: 50 })];
  t.equal(tally(samples, [key]).countedWithoutExactAnswer, 0);
  t.equal(tally(samples, [{ ...key, shared: false }]).countedWithoutExactAnswer, 1);
});

t.test("token bucket: degraded answers beyond the bound are over, not undegraded", async (t) => {
  const samples = [answer(0, T0, 200), answer(0, T0 + 10, 200), answer(0, T0 + 20, 200, { degraded: true })];
  t.same(tally(samples, [tb]).tokenBucket, { overAdmitted: 1, worst: 1, undegraded: 0, worstUndegraded: 0 });
});

t.test("token bucket: at most limit + refill since the first request", async (t) => {
  // limit 2 per 60 s: one token every 30 s.
  const samples = [answer(0, T0, 200), answer(0, T0 + 10, 200), answer(0, T0 + 20, 200), answer(0, T0 + 30_000, 200), answer(0, T0 + 30_010, 429)];
  const r = tally(samples, [tb]);
  t.same(
    r.tokenBucket,
    { overAdmitted: 1, worst: 1, undegraded: 1, worstUndegraded: 1 },
    "the third within a second is one too many; the refilled one is fine",
  );
});

t.test("statuses other than 200/429 and client failures are counted apart", async (t) => {
  const r = tally([answer(0, T0, 503), answer(0, T0, 0, { error: "timed out" }), answer(0, T0, 200, { resetTime: T0 / 1000 + 60, count: 1 })], [fw]);
  t.equal(r.unexpected, 1);
  t.equal(r.failures, 1);
  t.equal(r.requests, 3);
});

import { ceilDiv, floorDiv } from "./integer.js";
import { settleCharge } from "./charge.js";
import { bucketAgesSound, bucketFromAges, bucketToAges, timesAsTheyAre } from "./ages.js";
import type { Algorithm, LimitState } from "./types.js";

/**
 * Capacity `limit`, starts full, refills continuously at limit/D tokens per second, a
 * request takes `cost` tokens (one by default). Levels are kept in units of 1/D_ms of a token, so the refill
 * is exactly `limit` units per millisecond and one token is D_ms units: integers only.
 *
 * What is kept across requests is the consumption (tokens taken and not yet refilled),
 * not the token count: a changed limit then keeps what was used, as the windows keep
 * their counts, and the bucket stays the exact dual of the leaky bucket.
 *
 * State: a = tokens left (scaled) at time b, b = time (ms), c = the limit then in force.
 * `a` may be negative after a merge: tokens owed.
 */
export const tokenBucket: Algorithm<"token-bucket"> = {
  name: "token-bucket",
  code: 2,

  step(state, limit, D, now, out, cost = 1) {
    const capacity = limit * D;
    const level = state === null ? capacity : capacity - consumedAt(state, limit, D, now);
    // A peek (cost 0) asks whether one token is there, and takes none.
    const need = (cost === 0 ? 1 : cost) * D;
    if (level >= need) {
      const after = level - cost * D;
      out.allowed = true;
      out.remaining = floorDiv(after, D);
      out.retryAfterMs = 0;
      out.resetMs = now + ceilDiv(capacity - after, limit);
      out.a = after;
      out.b = now;
      out.c = limit;
    } else {
      out.allowed = false;
      out.remaining = 0;
      // The level rises by `limit` units per ms up to capacity, and need ≤ capacity.
      out.retryAfterMs = ceilDiv(need - level, limit);
      out.resetMs = now + ceilDiv(capacity - level, limit);
    }
  },

  charge(state, limit, D, now, out, cost) {
    const capacity = limit * D;
    const level = state === null ? capacity : capacity - consumedAt(state, limit, D, now);
    // Never above full; owing at most one whole bucket, refilled continuously like any level.
    const after = Math.max(-capacity, Math.min(capacity, level - cost * D));
    out.a = after;
    out.b = now;
    out.c = limit;
    settleCharge(this, limit, D, now, out, after >= 0, ceilDiv(capacity - after, D));
  },

  merge(x, y, D, now, out) {
    // Each side's consumption is added up; the newer side's limit is the one in force.
    const limit = x.b >= y.b ? x.c : y.c;
    const consumed = consumedAt(x, limit, D, now) + consumedAt(y, limit, D, now);
    out.a = limit * D - consumed;
    out.b = now;
    out.c = limit;
  },

  mergeCopies(x, y, D, now, out) {
    // The further advanced copy has consumed more (refill is the same clock for both).
    const limit = x.b >= y.b ? x.c : y.c;
    const consumed = Math.max(consumedAt(x, limit, D, now), consumedAt(y, limit, D, now));
    out.a = limit * D - consumed;
    out.b = now;
    out.c = limit;
  },

  refund(state, cost, _countedAt, D, now, out) {
    const limit = state.c;
    const consumed = Math.max(0, consumedAt(state, limit, D, now) - cost * D);
    out.a = limit * D - consumed;
    out.b = now;
    out.c = limit;
  },

  expiresAt(state: Readonly<LimitState>, limit: number, D: number) {
    return state.b + ceilDiv(state.c * D - state.a, limit);
  },

  checkAged(aged, D, bounds) {
    // a = tokens left at b (scaled, < 0 when owed), b = that level's age, c = the limit.
    if (!bucketAgesSound(aged, bounds)) return "invalid";
    const capacity = aged.c * D;
    // Owing more than one whole bucket would block past the two windows an expiry may reach.
    if (aged.a > capacity) return "invalid";
    aged.a = Math.max(aged.a, -capacity);
    return "ok";
  },

  leaving: timesAsTheyAre,
  toAges: bucketToAges,
  fromAges: bucketFromAges,
};

/** Scaled tokens taken and not yet refilled at `now`, refilling at the current limit's rate. */
function consumedAt(state: Readonly<LimitState>, limit: number, D: number, now: number): number {
  return Math.max(0, state.c * D - state.a - Math.max(0, now - state.b) * limit);
}

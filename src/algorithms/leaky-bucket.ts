import { ceilDiv, floorDiv } from "./integer.js";
import { settleCharge } from "./charge.js";
import { bucketAgesSound, bucketFromAges, bucketToAges, timesAsTheyAre } from "./ages.js";
import type { Algorithm, LimitState } from "./types.js";

/**
 * A meter of capacity `limit` draining continuously at limit/D per second; a request
 * adds one unit when it fits. It is the dual of the token bucket (meter = capacity −
 * tokens) and admits exactly the same requests. Units are 1/D_ms of a request, as there.
 *
 * State: a = meter level (scaled), b = time of that level (ms), c = last limit.
 */
export const leakyBucket: Algorithm<"leaky-bucket"> = {
  name: "leaky-bucket",
  code: 3,

  step(state, limit, D, now, out, cost = 1) {
    const capacity = limit * D;
    let meter = 0;
    if (state !== null) meter = Math.max(0, state.a - Math.max(0, now - state.b) * limit);
    // A peek (cost 0) asks whether one unit fits, and adds none.
    const need = (cost === 0 ? 1 : cost) * D;
    if (meter + need <= capacity) {
      const after = meter + cost * D;
      out.allowed = true;
      out.remaining = floorDiv(capacity - after, D);
      out.retryAfterMs = 0;
      out.resetMs = now + ceilDiv(after, limit);
      out.a = after;
      out.b = now;
      out.c = limit;
    } else {
      out.allowed = false;
      out.remaining = 0;
      // The meter drains by `limit` units per ms down to 0, and need ≤ capacity.
      out.retryAfterMs = ceilDiv(meter + need - capacity, limit);
      out.resetMs = now + ceilDiv(meter, limit);
    }
  },

  charge(state, limit, D, now, out, cost) {
    const capacity = limit * D;
    let meter = 0;
    if (state !== null) meter = Math.max(0, state.a - Math.max(0, now - state.b) * limit);
    // Never below empty; holding at most two whole buckets (one beyond full), drained continuously.
    const after = Math.max(0, Math.min(2 * capacity, meter + cost * D));
    out.a = after;
    out.b = now;
    out.c = limit;
    settleCharge(this, limit, D, now, out, after <= capacity, ceilDiv(after, D));
  },

  merge(x, y, _D, now, out) {
    const limit = x.b >= y.b ? x.c : y.c;
    const drained = (s: Readonly<LimitState>) => Math.max(0, s.a - Math.max(0, now - s.b) * limit);
    out.a = drained(x) + drained(y);
    out.b = now;
    out.c = limit;
  },

  mergeCopies(x, y, _D, now, out) {
    const limit = x.b >= y.b ? x.c : y.c;
    const drained = (s: Readonly<LimitState>) => Math.max(0, s.a - Math.max(0, now - s.b) * limit);
    const level = Math.max(drained(x), drained(y));
    out.a = level;
    out.b = now;
    out.c = limit;
  },

  refund(state, cost, _countedAt, D, now, out) {
    const limit = state.c;
    const meter = Math.max(0, state.a - Math.max(0, now - state.b) * limit);
    out.a = Math.max(0, meter - cost * D);
    out.b = now;
    out.c = limit;
  },

  expiresAt(state: Readonly<LimitState>, limit: number, _D: number) {
    return state.b + ceilDiv(state.a, limit);
  },

  checkAged(aged, D, bounds) {
    // a = the meter's level at b (scaled), b = that level's age, c = the limit.
    if (!bucketAgesSound(aged, bounds) || aged.a < 0) return "invalid";
    // Holding more than one whole bucket beyond full would block past the two windows an expiry may reach.
    aged.a = Math.min(aged.a, 2 * aged.c * D);
    return "ok";
  },

  leaving: timesAsTheyAre,
  toAges: bucketToAges,
  fromAges: bucketFromAges,
};

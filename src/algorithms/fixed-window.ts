import { checkWindowAges, windowFromAges, windowToAges } from "./ages.js";
import { MAX_COUNT, settleCharge } from "./charge.js";
import type { Algorithm, LimitState } from "./types.js";

/** The start of the fixed window holding `now` (ms): windows are aligned to the Unix epoch, [k·D, (k+1)·D). */
export function fixedWindowStart(now: number, durationMs: number): number {
  return now - (now % durationMs);
}

/**
 * Up to `limit` requests per window, windows aligned to the Unix epoch: [k·D, (k+1)·D).
 * State: a = window start (ms), b = requests counted in that window.
 */
export const fixedWindow: Algorithm<"fixed-window"> = {
  name: "fixed-window",
  code: 0,

  step(state, limit, durationMs, now, out, cost = 1) {
    const windowStart = fixedWindowStart(now, durationMs);
    const windowEnd = windowStart + durationMs;
    const count = state !== null && state.a === windowStart ? state.b : 0;
    out.resetMs = windowEnd;
    // A peek (cost 0) asks whether one more would fit, and counts nothing.
    if (count + (cost === 0 ? 1 : cost) <= limit) {
      out.allowed = true;
      out.remaining = limit - count - cost;
      out.retryAfterMs = 0;
      out.a = windowStart;
      out.b = count + cost;
      out.c = 0;
    } else {
      out.allowed = false;
      out.remaining = 0;
      // cost ≤ limit fits into the next window's empty count.
      out.retryAfterMs = windowEnd - now;
    }
  },

  charge(state, limit, durationMs, now, out, cost) {
    const windowStart = fixedWindowStart(now, durationMs);
    const count = state !== null && state.a === windowStart ? state.b : 0;
    const after = Math.min(MAX_COUNT, Math.max(0, count + cost));
    out.a = windowStart;
    out.b = after;
    out.c = 0;
    // Debt lasts until the window ends: the next window starts from zero.
    settleCharge(this, limit, durationMs, now, out, after <= limit, after);
  },

  merge(x, y, _durationMs, _now, out) {
    // Counts of an older window no longer matter; counts of the same window add up.
    if (x.a === y.a) {
      out.a = x.a;
      out.b = x.b + y.b;
    } else {
      const later = x.a > y.a ? x : y;
      out.a = later.a;
      out.b = later.b;
    }
    out.c = 0;
  },

  mergeCopies(x, y, _durationMs, _now, out) {
    // One history only moves forward: a later window, or more requests in the same one.
    const a = Math.max(x.a, y.a);
    out.b = Math.max(x.a === a ? x.b : 0, y.a === a ? y.b : 0);
    out.a = a;
    out.c = 0;
  },

  refund(state, cost, countedAt, durationMs, _now, out) {
    out.a = state.a;
    out.b = state.a === countedAt - (countedAt % durationMs) ? Math.max(0, state.b - cost) : state.b;
    out.c = 0;
  },

  expiresAt(state: Readonly<LimitState>, _limit: number, durationMs: number) {
    return state.a + durationMs;
  },

  checkAged(aged, D, bounds) {
    // a = the window start's age, b = its count, c = 0; a window older than one counts nothing.
    if (aged.c !== 0) return "invalid";
    return checkWindowAges(aged, 1, D, bounds);
  },

  toAges: windowToAges,
  fromAges: windowFromAges,
};

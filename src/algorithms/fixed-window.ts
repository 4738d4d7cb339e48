import { carriedStart, checkWindowAges, windowFromAges, windowLeaving, windowToAges } from "./ages.js";
import { MAX_COUNT, settleCharge } from "./charge.js";
import type { Algorithm, LimitState } from "./types.js";

/** The start of the fixed window holding `now` (ms): windows are aligned to the Unix epoch, [k·D, (k+1)·D). */
export function fixedWindowStart(now: number, durationMs: number): number {
  return now - (now % durationMs);
}

/**
 * Up to `limit` requests per window, windows aligned to the Unix epoch: [k·D, (k+1)·D).
 * State: a = window start (ms), b = requests counted in that window. A start after the
 * current window's (a count carried past a skewed hand-off, ages.ts windowFromAges) counts now
 * too, and new requests join it there: it ends with the later window. Invariant: a
 * handed-off count is never released before the sender's window would have ended.
 */
export const fixedWindow: Algorithm<"fixed-window"> = {
  name: "fixed-window",
  code: 0,

  step(state, limit, durationMs, now, out, cost = 1) {
    const windowStart = carriedStart(state, now, durationMs);
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
    const windowStart = carriedStart(state, now, durationMs);
    const count = state !== null && state.a === windowStart ? state.b : 0;
    const after = Math.min(MAX_COUNT, Math.max(0, count + cost));
    out.a = windowStart;
    out.b = after;
    out.c = 0;
    // Debt lasts until the window ends: the next window starts from zero.
    settleCharge(this, limit, durationMs, now, out, after <= limit, after);
  },

  merge(x, y, durationMs, now, out) {
    // Counts of an older window no longer matter; counts that both count now add up (the
    // same window, or the current one beside one carried into the next), kept to the later end.
    const current = fixedWindowStart(now, durationMs);
    if (x.a === y.a || (x.a >= current && y.a >= current)) {
      out.a = Math.max(x.a, y.a);
      out.b = x.b + y.b;
    } else {
      const later = x.a > y.a ? x : y;
      out.a = later.a;
      out.b = later.b;
    }
    out.c = 0;
  },

  mergeCopies(x, y, durationMs, now, out) {
    // One history only moves forward: a later window, or more requests in the same one (a
    // count carried into the next window continues the current one's).
    const a = Math.max(x.a, y.a);
    const floor = Math.min(a, fixedWindowStart(now, durationMs));
    out.b = Math.max(x.a >= floor ? x.b : 0, y.a >= floor ? y.b : 0);
    out.a = a;
    out.c = 0;
  },

  // A request counted into a carried window (its start after countedAt's window) is not given
  // back: the count stays held, erring towards counting.
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
    // No start after the send beyond the tolerance, not even a carried one: windowLeaving
    // sends those as begun at the send, and windowFromAges carries them here again.
    if (aged.c !== 0) return "invalid";
    return checkWindowAges(aged, 1, D, bounds);
  },

  leaving: windowLeaving,
  toAges: windowToAges,
  fromAges: windowFromAges,
};

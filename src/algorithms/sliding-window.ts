import { MAX_COUNT, settleCharge } from "./charge.js";
import { ceilDiv, floorDiv } from "./integer.js";
import { checkWindowAges, windowFromAges, windowLeaving, windowToAges } from "./ages.js";
import type { Algorithm, LimitState } from "./types.js";

/**
 * The two-window estimate (Cloudflare, Unkey, Upstash): with epoch-aligned windows,
 * estimate = previous × (1 − elapsed/D) + current, and a request is allowed when
 * estimate + cost ≤ limit. Everything is multiplied through by D (in ms) so the test is
 * integer arithmetic: previous × (D − elapsed) + (current + cost) × D ≤ limit × D.
 *
 * State: a = current window start (ms), b = current window count, c = previous window count.
 */
/** The count a state holds for the window starting at `windowStart` (0 when none, or an older one). */
function currentCount(state: Readonly<LimitState> | null, windowStart: number): number {
  return state !== null && state.a === windowStart ? state.b : 0;
}

/** The count a state holds for the window before `windowStart`'s. */
function previousCount(state: Readonly<LimitState> | null, windowStart: number, D: number): number {
  if (state === null) return 0;
  if (state.a === windowStart) return state.c;
  return state.a === windowStart - D ? state.b : 0;
}

export const slidingWindow: Algorithm<"sliding-window"> = {
  name: "sliding-window",
  code: 1,

  step(state, limit, D, now, out, cost = 1) {
    const windowStart = now - (now % D);
    const current = currentCount(state, windowStart);
    const previous = previousCount(state, windowStart, D);
    const elapsed = now - windowStart;
    const budget = limit * D; // limit, scaled by D
    const weightedPrevious = previous * (D - elapsed);
    // A peek (cost 0) asks whether one more would fit, and counts nothing.
    const need = cost === 0 ? 1 : cost;

    if (weightedPrevious + (current + need) * D <= budget) {
      const counted = current + cost;
      out.allowed = true;
      out.remaining = floorDiv(budget - weightedPrevious - counted * D, D);
      out.retryAfterMs = 0;
      // The current window's requests weigh on the estimate until the end of the next window.
      out.resetMs = counted > 0 ? windowStart + 2 * D : windowStart + D;
      out.a = windowStart;
      out.b = counted;
      out.c = previous;
      return;
    }

    out.allowed = false;
    out.remaining = 0;
    out.resetMs = current > 0 ? windowStart + 2 * D : windowStart + D;
    // Earliest elapsed time e in this window with previous × (D − e) ≤ (limit − need − current) × D.
    const roomThisWindow = limit - need - current;
    if (roomThisWindow >= 0 && previous > 0) {
      const e = D - floorDiv(roomThisWindow * D, previous);
      if (e < D) {
        out.retryAfterMs = e - elapsed;
        return;
      }
    }
    // Otherwise in the next window, where this window's count becomes `previous`:
    // earliest e with current × (D − e) ≤ (limit − need) × D. e = D means the window after.
    const e = current === 0 ? 0 : Math.max(0, D - floorDiv((limit - need) * D, current));
    out.retryAfterMs = D + e - elapsed;
  },

  charge(state, limit, D, now, out, cost) {
    const windowStart = now - (now % D);
    let current = currentCount(state, windowStart);
    let previous = previousCount(state, windowStart, D);
    if (cost >= 0) current = Math.min(MAX_COUNT, current + cost);
    else {
      // A refund comes off this window first, then the previous one: the estimate never goes below zero.
      const back = Math.min(current, -cost);
      previous = Math.max(0, previous + cost + back);
      current -= back;
    }
    out.a = windowStart;
    out.b = current;
    out.c = previous;
    // Debt is held in the weighted estimate, so it fades as the previous window's weight does.
    const estimate = previous * (D - (now - windowStart)) + current * D;
    settleCharge(this, limit, D, now, out, estimate <= limit * D, ceilDiv(estimate, D));
  },

  merge(x, y, D, _now, out) {
    // Disjoint requests: the counts of each window add up.
    mergeWindows(x, y, D, add, out);
  },

  mergeCopies(x, y, D, _now, out) {
    // Copies of one history: each window keeps the larger of the two counts.
    mergeWindows(x, y, D, Math.max, out);
  },

  refund(state, cost, countedAt, D, _now, out) {
    const window = countedAt - (countedAt % D);
    const a = state.a;
    let b = state.b;
    let c = state.c;
    if (a === window) b = Math.max(0, b - cost);
    else if (a === window + D) c = Math.max(0, c - cost);
    out.a = a;
    out.b = b;
    out.c = c;
  },

  expiresAt(state: Readonly<LimitState>, _limit: number, D: number) {
    return state.b > 0 ? state.a + 2 * D : state.a + D;
  },

  checkAged(aged, D, bounds) {
    // a = the current window start's age, b = its count, c = the previous window's; it weighs for two windows.
    return checkWindowAges(aged, 2, D, bounds);
  },

  leaving: windowLeaving,
  toAges: windowToAges,
  fromAges: windowFromAges,
};

const add = (p: number, q: number): number => p + q;

/**
 * x and y aligned to the later window (a state one window older has its current count as
 * the previous one; older still counts nothing), then combined window by window. Reads
 * both before writing, so `out` may be x or y.
 */
function mergeWindows(x: Readonly<LimitState>, y: Readonly<LimitState>, D: number, combine: (p: number, q: number) => number, out: LimitState): void {
  const windowStart = Math.max(x.a, y.a);
  const current = combine(currentCount(x, windowStart), currentCount(y, windowStart));
  const previous = combine(previousCount(x, windowStart, D), previousCount(y, windowStart, D));
  out.a = windowStart;
  out.b = current;
  out.c = previous;
}

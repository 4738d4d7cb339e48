import { MAX_COUNT, settleCharge } from "./charge.js";
import { ceilDiv, floorDiv } from "./integer.js";
import { carriedStart, checkWindowAges, windowFromAges, windowLeaving, windowToAges } from "./ages.js";
import type { Algorithm, LimitState } from "./types.js";

/**
 * The two-window estimate (Cloudflare, Unkey, Upstash): with epoch-aligned windows,
 * estimate = previous × (1 − elapsed/D) + current, and a request is allowed when
 * estimate + cost ≤ limit. Everything is multiplied through by D (in ms) so the test is
 * integer arithmetic: previous × (D − elapsed) + (current + cost) × D ≤ limit × D.
 *
 * State: a = current window start (ms), b = current window count, c = previous window count.
 *
 * A start after the current window's is a state carried past a skewed hand-off (ages.ts
 * windowFromAges): until that window begins, the estimate is what it will be at its start
 * (both counts whole), and new requests join it there. Invariant: a handed-off count never
 * weighs less than it would have on its sender.
 */
/** The count a state holds for the window starting at `windowStart` (0 when none, or an older one). */
function currentCount(state: Readonly<LimitState> | null, windowStart: number): number {
  return state !== null && state.a === windowStart ? state.b : 0;
}

/**
 * The count a state holds for the window before `windowStart`'s. When that window is a
 * carried one (merges: it begins after now), all the state still weighs now goes into it.
 */
function previousCount(state: Readonly<LimitState> | null, windowStart: number, D: number, carried = false): number {
  if (state === null) return 0;
  if (state.a === windowStart) return state.c;
  if (state.a === windowStart - D) return carried ? state.b + state.c : state.b;
  return carried && state.a === windowStart - 2 * D ? state.b : 0;
}

export const slidingWindow: Algorithm<"sliding-window"> = {
  name: "sliding-window",
  code: 1,

  step(state, limit, D, now, out, cost = 1) {
    const windowStart = carriedStart(state, now, D);
    const current = currentCount(state, windowStart);
    const previous = previousCount(state, windowStart, D);
    // Negative in a carried window: its weights are those of its start until then.
    const elapsed = now - windowStart;
    const budget = limit * D; // limit, scaled by D
    const weightedPrevious = previous * (D - Math.max(0, elapsed));
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
    const windowStart = carriedStart(state, now, D);
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
    const estimate = previous * (D - Math.max(0, now - windowStart)) + current * D;
    settleCharge(this, limit, D, now, out, estimate <= limit * D, ceilDiv(estimate, D));
  },

  merge(x, y, D, now, out) {
    // Disjoint requests: the counts of each window add up.
    mergeWindows(x, y, D, now, add, out);
  },

  mergeCopies(x, y, D, now, out) {
    // Copies of one history: each window keeps the larger of the two counts.
    mergeWindows(x, y, D, now, Math.max, out);
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
 * both before writing, so `out` may be x or y. When the later window is a carried one (it
 * begins after `now`), what the other still weighs now goes whole into its previous count:
 * two windows of it would not fit, and a count held whole until then errs towards counting
 * (for copies, max of such sums may count a little more than either copy).
 */
function mergeWindows(
  x: Readonly<LimitState>,
  y: Readonly<LimitState>,
  D: number,
  now: number,
  combine: (p: number, q: number) => number,
  out: LimitState,
): void {
  const windowStart = Math.max(x.a, y.a);
  const carried = windowStart > now - (now % D);
  const current = combine(currentCount(x, windowStart), currentCount(y, windowStart));
  const previous = combine(previousCount(x, windowStart, D, carried), previousCount(y, windowStart, D, carried));
  out.a = windowStart;
  out.b = current;
  out.c = previous;
}

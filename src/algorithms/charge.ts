import type { Algorithm, Step } from "./types.js";

/**
 * A window's count saturates here (10^15: a million charges of the largest cost), so a count
 * in debt stays an exact integer in a double whatever is charged; a window's debt ends with
 * its window (the sliding window's with the next one), so no count blocks longer than that.
 */
export const MAX_COUNT = 1e15;

const peek: Step = { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: 0, a: 0, b: 0, c: 0, used: 0 };

/**
 * The end of every Algorithm.charge: `out.a/b/c` hold the state after the charge, and the
 * algorithm has said whether it is past its limit and how much it counts (`used`). What a
 * caller is told of the state after it (remaining, when a request of 1 passes, when it is
 * full again) is what a peek of it answers, so a charge and the next POST /limit agree to
 * the millisecond.
 */
export function settleCharge(algorithm: Algorithm, limit: number, durationMs: number, now: number, out: Step, within: boolean, used: number): void {
  algorithm.step(out, limit, durationMs, now, peek, 0);
  out.allowed = within;
  out.used = used;
  out.remaining = peek.allowed ? peek.remaining : 0;
  out.retryAfterMs = peek.allowed ? 0 : peek.retryAfterMs;
  out.resetMs = peek.resetMs;
}

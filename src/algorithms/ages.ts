import { MAX_COUNT } from "./charge.js";
import type { AgedBounds, AgedVerdict, LimitState } from "./types.js";

/*
 * States cross nodes with their times as ages (docs/peer-protocol.md, "States on the
 * wire"): two nodes' clocks differ, how long ago something happened does not. The sender
 * writes `now − time` at its own `now`; the reader puts the time back on its own clock.
 */

/** Windows (a = window start): the start's age. */
export function windowToAges(state: Readonly<LimitState>, now: number, out: LimitState): void {
  out.a = now - state.a;
  out.b = state.b;
  out.c = state.c;
}

/**
 * Windows are aligned to the epoch of each node's own clock, so a window start cannot keep
 * its exact age on a skewed reader: it keeps how many whole windows ago it began. The
 * sender's current window (age < D) becomes the reader's current window with its counts,
 * the one before becomes the one before, whatever the skew. A start slightly in the future
 * (a sender whose clock stepped back) reads as the current window.
 */
export function windowFromAges(aged: Readonly<LimitState>, D: number, now: number, out: LimitState): void {
  const windowsAgo = Math.max(0, Math.floor(aged.a / D));
  out.a = now - (now % D) - windowsAgo * D;
  out.b = aged.b;
  out.c = aged.c;
}

/** Buckets (b = time of the level in a): that time's age. */
export function bucketToAges(state: Readonly<LimitState>, now: number, out: LimitState): void {
  out.a = state.a;
  out.b = now - state.b;
  out.c = state.c;
}

/** Buckets refill and drain continuously: the level's age is kept exactly, so a skew grants no refill and takes none. */
export function bucketFromAges(aged: Readonly<LimitState>, _D: number, now: number, out: LimitState): void {
  out.a = aged.a;
  out.b = now - aged.b;
  out.c = aged.c;
}

/**
 * A window state from a peer (a = the start's age, b and c = counts): counts are never
 * negative and are clamped to MAX_COUNT, where a charge saturates them (a count past the limit
 * is debt, which must travel whole; it blocks no longer than its window weighs); a start
 * `weighs` windows ago or more counts nothing any more.
 */
export function checkWindowAges(aged: LimitState, weighs: number, D: number, bounds: AgedBounds): AgedVerdict {
  if (aged.a < -bounds.ageToleranceMs || aged.b < 0 || aged.c < 0) return "invalid";
  if (aged.a >= weighs * D) return "expired";
  aged.b = Math.min(aged.b, MAX_COUNT);
  aged.c = Math.min(aged.c, MAX_COUNT);
  return "ok";
}

/**
 * The part every bucket state from a peer shares (b = the level's age, c = the limit then in
 * force): a limit a request may carry, and an age within two of the longest windows (an
 * expiry never reaches further).
 */
export function bucketAgesSound(aged: LimitState, bounds: AgedBounds): boolean {
  return aged.c >= 1 && aged.c <= bounds.maxLimit && aged.b >= -bounds.ageToleranceMs && aged.b <= 2 * bounds.maxDurationMs;
}

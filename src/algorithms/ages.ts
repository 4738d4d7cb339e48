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

/**
 * How far past this node's window end a handed-off fixed window may end before its count is
 * carried into the next window: clocks within this of each other release a count at most
 * this early, rather than hold every hand-off's count a whole window longer. It covers the
 * age a sender whose clock stepped back may stamp (a start up to the age tolerance after
 * the send, AGE_TOLERANCE_MS), so a carry never reaches past the next window.
 */
export const CARRY_SLACK_MS = 1000;

/**
 * Fixed windows: the sender's window, put on this clock (it began at now − age), must count
 * until its own end. Invariant: a handed-off count is never released before the sender's
 * window would have ended (up to CARRY_SLACK_MS). When that end lies past this node's
 * current window (a skew of more than the slack, either direction), the state is placed in
 * the next window, whose start is in the future: fixedWindow counts a state whose start is
 * at or after the current window's (carriedStart), so the count holds now and through the
 * next window (held up to one window longer, never released early). A window still open on
 * the sender (age < D) stays at least in this node's current window; an ended one keeps how
 * many windows ago it began, as windowFromAges does.
 *
 * The carry is made here, by the receiver, after checkWindowAges: the wire never carries a
 * start after the send beyond the age tolerance. A carried state sent on is sent as begun
 * at its send (windowLeaving), and its next receiver carries it again where it must.
 */
export function fixedWindowFromAges(aged: Readonly<LimitState>, D: number, now: number, out: LimitState): void {
  const current = now - (now % D);
  // The start of this node's window holding the sender's last millisecond but the slack.
  const last = now - aged.a + D - 1 - CARRY_SLACK_MS;
  const windowsAgo = Math.max(0, Math.floor(aged.a / D));
  out.a = Math.min(current + D, Math.max(last - (last % D), current - windowsAgo * D));
  out.b = aged.b;
  out.c = aged.c;
}

/**
 * Windows, as they leave this node (Algorithm.leaving: a hand-off, a replica, a snapshot): a
 * start after `now` (a fixed window carried into the next one by fixedWindowFromAges) is
 * written as `now`, so no state on the wire or on disk is stamped after its send, and the
 * reader's check (checkWindowAges) stays as strict as for a forged one. Invariant: a
 * handed-off count is never released before the sender's window would have ended. The
 * reader takes a window begun at `now`, which ends at now + D: not before the window the
 * count was carried for (its first sender's, which ended by the receive + D), so it carries
 * the count again where its own window would end first. It may hold it up to a window longer.
 */
export function windowLeaving(state: Readonly<LimitState>, now: number, out: LimitState): void {
  out.a = Math.min(state.a, now);
  out.b = state.b;
  out.c = state.c;
}

/** Buckets and concurrency leases leave as they are: nothing carries them ahead (their checkAged bounds how far ahead a time may be). */
export function timesAsTheyAre(state: Readonly<LimitState>, _now: number, out: LimitState): void {
  out.a = state.a;
  out.b = state.b;
  out.c = state.c;
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

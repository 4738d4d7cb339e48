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
 * How far past this node's window end a handed-off window may end before its count is
 * carried into the next window: clocks within this of each other release a count at most
 * this early, rather than hold every hand-off's count a whole window longer. It covers the
 * age a sender whose clock stepped back may stamp (a start up to the age tolerance after
 * the send, AGE_TOLERANCE_MS), so a carry never reaches past the next window.
 */
export const CARRY_SLACK_MS = 1000;

/**
 * Windows are aligned to the epoch of each node's own clock, so a window start cannot keep
 * its exact age on a skewed reader. The sender's window began at now − age on this clock and
 * must weigh here at least as long and as much as there. Invariant: a handed-off count is
 * never released before the sender's window would have ended (up to CARRY_SLACK_MS). So the
 * state goes into this node's first window that begins no earlier than the sender's (less
 * the slack): a window that ends, and for the sliding window starts to fade, no earlier.
 * When the sender's window ends after this node's current one (a skew of more than the slack,
 * either direction), that is the next window, whose start is in the future: a carried state.
 * Both windows count it now and through that window (carriedStart), and new requests join it
 * there: held up to one window longer, never released early. A start never lands earlier
 * than the same number of whole windows ago as on the sender (the sender's current window is
 * at least this node's current one), nor later than the next window.
 *
 * The carry is made here, by the receiver, after checkWindowAges: the wire never carries a
 * start after the send beyond the age tolerance. A carried state sent on leaves as begun at
 * its send (windowLeaving), and its next receiver carries it again where it must.
 */
export function windowFromAges(aged: Readonly<LimitState>, D: number, now: number, out: LimitState): void {
  const current = now - (now % D);
  // This node's window holding the sender's window's last millisecond but the slack.
  const last = now - aged.a + D - 1 - CARRY_SLACK_MS;
  const windowsAgo = Math.max(0, Math.floor(aged.a / D));
  out.a = Math.min(current + D, Math.max(last - (last % D), current - windowsAgo * D));
  out.b = aged.b;
  out.c = aged.c;
}

/** The window a request at `now` counts in: the current one, or a later one a carried state holds (windowFromAges). */
export function carriedStart(state: Readonly<LimitState> | null, now: number, D: number): number {
  const current = now - (now % D);
  return state !== null && state.a > current ? state.a : current;
}

/**
 * Windows, as they leave this node (Algorithm.leaving: a hand-off, a replica, a snapshot): a
 * start after `now` (a window carried into the next one by windowFromAges) is
 * written as `now`, so no state on the wire or on disk is stamped after its send, and the
 * reader's check (checkWindowAges) stays as strict as for a forged one. Invariant: a
 * handed-off count is never released before the sender's window would have ended. The
 * reader takes a window begun at `now`, which ends at now + D: not before the window the
 * count was carried for (its first sender's, which ended by the receive + D), so it carries
 * the count again where its own window would end first. It may hold it up to a window longer.
 * Returns how far the start moved back (ms): the state's expiry moves back as far.
 */
export function windowLeaving(state: Readonly<LimitState>, now: number, out: LimitState): number {
  const earlier = Math.max(0, state.a - now);
  out.a = state.a - earlier;
  out.b = state.b;
  out.c = state.c;
  return earlier;
}

/** Buckets and concurrency leases leave as they are: nothing carries them ahead (their checkAged bounds how far ahead a time may be). */
export function timesAsTheyAre(state: Readonly<LimitState>, _now: number, out: LimitState): number {
  out.a = state.a;
  out.b = state.b;
  out.c = state.c;
  return 0;
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

import { algorithmByCode, type AgedBounds, type AgedVerdict } from "../../../algorithms/index.js";
import { REQUEST_BOUNDS, type LimitQuery } from "../../../decision.js";
import { DecideCode, DecideFlag, type DecideResult } from "../../../peer/index.js";
import type { StoredState } from "../../table/state-table.js";
import { parseStateKey, stateKeyOf } from "../../ring/state-key.js";
import { rebaseState, type AgedState } from "../../records/state-records.js";

/**
 * What other members send is checked like what callers send (docs/peer-protocol.md,
 * "Peers' data"): an authenticated peer may still be buggy, out of date, or run by someone
 * who stole the cluster secret, and one bad number must not block a key for centuries,
 * make it unlimited, or reach a caller as NaN.
 *
 * Clocks of different nodes differ: a forwarded answer's reset time, put on this node's
 * clock with the owner's measured offset (resetTimeHere) or not yet (no heartbeat
 * measured), may still be this far from ours. States carry ages instead (checkState).
 */
export const CLOCK_SKEW_MS = 60_000;

/**
 * A forwarded answer's reset time (unix s) is a reading of the owner's clock; this node's
 * callers get it on this node's clock, so its answers agree with each other whoever decided
 * them, and an owner minutes off is not refused as out of bounds. `ownerOffsetMs` is the
 * owner's clock minus ours, measured by heartbeats (PONG, within half a round trip); NaN
 * before the first: unchanged. Rounded to whole seconds, so clocks in step (NTP keeps
 * them within milliseconds) change nothing; `retry_after` is relative and exact anyway.
 */
export function resetTimeHere(resetTime: number, ownerOffsetMs: number): number {
  return Number.isNaN(ownerOffsetMs) ? resetTime : resetTime - Math.round(ownerOffsetMs / 1000);
}

const MAX_DURATION_MS = REQUEST_BOUNDS.duration.max * 1000;

/**
 * Whether a decision forwarded by a peer (a DECIDE item, a BATCH item) asks what POST /limit
 * would accept from a caller (docs/api.md): the one rule for both, on fields, so the DECIDE
 * path checks it without building a query. The effective namespace (`namespace.slug`) has
 * no upper bound of its own: a slug's NFKD may outgrow the product. NaN fails every test.
 */
export function forwardedWithinContract(limit: number, duration: number, cost: number, namespace: string, identifier: string): boolean {
  const b = REQUEST_BOUNDS;
  return (
    limit >= b.limit.min &&
    limit <= b.limit.max &&
    duration >= b.duration.min &&
    duration <= b.duration.max &&
    cost >= b.cost.min &&
    cost <= limit &&
    namespace.length >= b.namespace.min &&
    identifier.length >= b.identifier.min &&
    identifier.length <= b.identifier.max
  );
}

/**
 * Whether a forwarded decision's answer fits the question asked: `remaining` within the
 * limit, the reset at most two windows ahead (the sliding window's reach), the wait
 * finite, non-negative and no longer than that. Anything else is a peer error for that
 * one item: the caller gets the fail-open answer instead of NaN or a negative count.
 */
export function replyWithinContract(r: DecideResult, query: LimitQuery, now: number): boolean {
  // An owner that applied an override answers for the limit it applied (within the contract, 0 a deny list).
  const applied = (r.flags & DecideFlag.APPLIED) !== 0;
  if (applied && !appliedWithinContract(r)) return false;
  // Shadow mode answers only what would have been blocked, and answers it allowed.
  if ((r.flags & DecideFlag.SHADOW) !== 0 && r.code !== DecideCode.ALLOWED) return false;
  const limit = applied ? r.limit : query.limit;
  const reach = 2 * (applied ? r.duration : query.duration) * 1000 + CLOCK_SKEW_MS;
  return (
    Number.isInteger(r.remaining) &&
    r.remaining >= 0 &&
    r.remaining <= limit &&
    r.resetTime * 1000 >= now - CLOCK_SKEW_MS &&
    r.resetTime * 1000 <= now + reach &&
    r.retryAfterMs >= 0 &&
    r.retryAfterMs <= reach
  );
}

/** The limit, window and algorithm of an APPLIED reply: what POST /limit accepts, and limit 0. */
function appliedWithinContract(r: DecideResult): boolean {
  const b = REQUEST_BOUNDS;
  return r.limit <= b.limit.max && r.duration >= b.duration.min && r.duration <= b.duration.max && algorithmByCode(r.algorithm) !== undefined;
}

export type StateVerdict = AgedVerdict;

/**
 * How far ahead of its send a peer's state may be stamped (a negative age): only a sender
 * whose own clock stepped back since it wrote the state does that, and NTP steps are well
 * under a second. Ages need no allowance for skew between nodes: they do not depend on it.
 */
export const AGE_TOLERANCE_MS = 1000;
/** The sender rounds an expiry up to whole seconds twice (its table's, then the age's). */
const EXPIRY_ROUNDING_MS = 2000;

/** What each algorithm checks a peer's state against: the request contract's bounds. */
const AGED_BOUNDS: AgedBounds = Object.freeze({ maxLimit: REQUEST_BOUNDS.limit.max, maxDurationMs: MAX_DURATION_MS, ageToleranceMs: AGE_TOLERANCE_MS });

/**
 * Check one state record from a peer (a hand-off, a replica) before it is merged: a
 * canonical key of a registered algorithm and a duration within the contract, values that
 * are integers, an expiry at most two windows after the send, and then what the algorithm
 * itself checks of its values (Algorithm.checkAged: signs, reach, ages not below
 * −AGE_TOLERANCE_MS; it clamps counts and levels beyond their reach in place). "expired":
 * a state that is already equivalent to none (dropped, harmlessly), a removal included.
 * Times are ages (shard/records/state-records.ts), so nothing here depends on this node's clock.
 */
export function checkState(key: string, state: Omit<AgedState, "origin" | "bornAgoS">): StateVerdict {
  const parsed = parseStateKey(key);
  if (parsed === undefined) return "invalid";
  const { algorithmCode, duration, ringKey } = parsed;
  const algorithm = algorithmByCode(algorithmCode);
  if (algorithm === undefined || !(duration >= REQUEST_BOUNDS.duration.min && duration <= REQUEST_BOUNDS.duration.max)) return "invalid";
  if (stateKeyOf(algorithmCode, duration, ringKey) !== key || !validRingKey(ringKey)) return "invalid";
  const D = duration * 1000;
  if (!Number.isInteger(state.expiresInS) || state.expiresInS * 1000 > 2 * D + AGE_TOLERANCE_MS + EXPIRY_ROUNDING_MS) return "invalid";
  if (state.expiresInS <= 0) return "expired";
  if (!Number.isInteger(state.a) || !Number.isInteger(state.b) || !Number.isInteger(state.c)) return "invalid";
  return algorithm.checkAged(state, D, AGED_BOUNDS);
}

/**
 * A peer's state record checked (checkState) and, when sound, put on this node's clock
 * `now` (rebaseState): the state to merge, or why there is none.
 */
export function admitState(key: string, aged: AgedState, now: number): StoredState | Exclude<StateVerdict, "ok"> {
  const verdict = checkState(key, aged);
  if (verdict !== "ok") return verdict;
  const { algorithmCode, duration } = parseStateKey(key)!;
  return rebaseState(algorithmCode, duration * 1000, aged, now);
}

/** `${ns.length}:${ns}${identifier}` with both parts within the contract's lower bounds and the identifier within its upper one. */
function validRingKey(ringKey: string): boolean {
  const colon = ringKey.indexOf(":");
  if (colon < 1 || colon > 10) return false;
  const nsLength = Number(ringKey.slice(0, colon));
  if (!Number.isInteger(nsLength) || String(nsLength) !== ringKey.slice(0, colon) || nsLength < REQUEST_BOUNDS.namespace.min) return false;
  const identifierLength = ringKey.length - colon - 1 - nsLength;
  return identifierLength >= REQUEST_BOUNDS.identifier.min && identifierLength <= REQUEST_BOUNDS.identifier.max;
}

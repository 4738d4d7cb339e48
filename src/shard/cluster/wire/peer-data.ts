import { algorithmByCode } from "../../../algorithms/index.js";
import { REQUEST_BOUNDS, type LimitQuery } from "../../../decision.js";
import { DecideCode, DecideFlag, type DecideResult } from "../../../peer/index.js";

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

/**
 * Whether a decision forwarded by a peer (a DECIDE item, a BATCH item) asks what POST /limit
 * would accept from a caller (docs/api.md): the one rule for both, on fields, so the DECIDE
 * path checks it without building a query. The effective namespace (`namespace.slug`) has
 * no upper bound of its own: a slug's NFKD may outgrow the product. NaN fails every test.
 * A charge (POST /limit/charge, RLS hits) has its own bounds: a uint32 limit, any cost but 0
 * within ±1e9 (0 too over RLS: a check that counts nothing).
 */
export function forwardedWithinContract(
  limit: number,
  duration: number,
  cost: number,
  namespace: string,
  identifier: string,
  charge = false,
  overridable = true,
): boolean {
  const b = REQUEST_BOUNDS;
  // RLS descriptors (not overridable) take the RLS wire's uint32 limits, as charges do.
  const limits = charge || !overridable ? b.chargeLimit : b.limit;
  return (
    limit >= limits.min &&
    limit <= limits.max &&
    duration >= b.duration.min &&
    duration <= b.duration.max &&
    (charge ? cost >= b.chargeCost.min && cost <= b.chargeCost.max : cost >= b.cost.min && cost <= limit) &&
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
  // DUPLICATE answers only a charge sent with an id; it is the owner's earlier answer, whose
  // reset may have passed since (a short window retried later): not held to `now`'s lower bound.
  const duplicate = (r.flags & DecideFlag.DUPLICATE) !== 0;
  if (duplicate && query.chargeId === undefined) return false;
  const limit = applied ? r.limit : query.limit;
  const reach = 2 * (applied ? r.duration : query.duration) * 1000 + CLOCK_SKEW_MS;
  // A charge past its limit carries its debt where `remaining` is: any u32.
  const debt = query.charge === true && r.code === DecideCode.BLOCKED;
  return (
    Number.isInteger(r.remaining) &&
    r.remaining >= 0 &&
    (debt || r.remaining <= limit) &&
    (duplicate || r.resetTime * 1000 >= now - CLOCK_SKEW_MS) &&
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

// The check of a peer's state records is the records' own (a snapshot's are checked the same
// way on load): shard/records/state-check.ts, re-exported here for the cluster's callers.
export { AGE_TOLERANCE_MS, admitState, checkState, type StateVerdict } from "../../records/state-check.js";

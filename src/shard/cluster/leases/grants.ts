import { fixedWindowStart } from "../../../algorithms/fixed-window.js";
import type { LimitQuery } from "../../../decision.js";
import type { LocalDecider } from "../../local/local-decider.js";
import { shareOf } from "../../local/share-rule.js";

/** A grant smaller than this is not worth its round trip: near the limit, decisions go back to the owner. */
export const MIN_GRANT = 16;

/** What an owner granted: requests, counted now in the window starting at `windowStart` (its clock, unix ms). */
export interface Grant {
  granted: number;
  windowStart: number;
}

/**
 * The owner's side of LEASE (docs/api.md, Shares): a member whose share of a key's window runs
 * low asks for `query.cost` more (at most one share). The owner grants what it can spare, a
 * decision of that cost on its own count (so it is counted at once, like any other), but no
 * more than its free requests divided by twice the members: grants shrink as the window fills,
 * and below MIN_GRANT none is given and every request of that member asks the owner. Nothing
 * for a key the share rule does not cover, or whose limit this owner's policy may change.
 * A grant needs no share held back: it is in the count from the moment it is given, so it
 * travels with the state (hand-off, replication) like any decision. `members`: the ring's.
 */
export function grantShare(local: LocalDecider, query: LimitQuery, ringKey: string, now: number, members: number): Grant {
  const windowStart = fixedWindowStart(now, query.duration * 1000);
  const share = shareOf(query.algorithm.code, query.limit);
  const none = { granted: 0, windowStart };
  if (share === 0 || members < 2 || query.cost < 1 || query.cost > share || local.mayChange(query)) return none;
  const free = local.decideKey(ringKey, query.algorithm, query.limit, query.duration, now, 0).remaining;
  const granted = Math.min(query.cost, Math.floor(free / (2 * members)));
  if (granted < MIN_GRANT) return none;
  return local.decideKey(ringKey, query.algorithm, query.limit, query.duration, now, granted).allowed ? { granted, windowStart } : none;
}

/**
 * The grant that goes back with a forwarded decision whose sender's share of the window opened
 * empty (DecideItemFlag.OPENING: it started or reconnected in that window, so the share by rule
 * may have been used by its earlier process). One share at most, sized and counted like a
 * LEASE's, so the key's next requests there are answered from it instead of each being
 * forwarded. Asked once per key, window and sender.
 */
export function openingGrant(local: LocalDecider, query: LimitQuery, ringKey: string, now: number, members: number): Grant {
  return grantShare(local, { ...query, cost: shareOf(query.algorithm.code, query.limit) }, ringKey, now, members);
}

import { algorithmByName } from "../../algorithms/index.js";

const FIXED_WINDOW = algorithmByName("fixed-window")!.code;

/**
 * Shares of a key's quota that members other than its owner may answer from without asking
 * (docs/api.md, Shares; shard/cluster/leases/). The rule is the same on every member, so an
 * owner and a sharer agree on it without a message: for a fixed-window limit of at least
 * SHARE_MIN_LIMIT, in a cluster of at most SHARE_MAX_MEMBERS members, each other member may
 * answer `shareOf(limit)` requests of each window on its own, and the owner decides its own
 * requests (its front end's, forwarded ones, batches) against the limit minus one share per
 * other member it knows. The shares count as used from the window's first moment, so the
 * members together never admit more than the limit; a share a member does not use is lost
 * for that window (under-admitted by at most one share per other member).
 */

/** Each other member's share: 1/128 of the limit (2 % of it held back on a 3-node ring). */
export const SHARE_DIVISOR = 128;
/** Smaller limits are not shared: a share would hold fewer than 16 requests. */
export const SHARE_MIN_LIMIT = 2048;
/** Past this many members, no share is taken or held back (each would be too small to pay). */
export const SHARE_MAX_MEMBERS = 16;

/** Requests a member may answer from its share of one window of `limit`, 0 when the limit is not shared. */
export function shareOf(algorithmCode: number, limit: number): number {
  return algorithmCode === FIXED_WINDOW && limit >= SHARE_MIN_LIMIT ? Math.floor(limit / SHARE_DIVISOR) : 0;
}

/**
 * The limit the owner decides its own requests against: `limit` less one share for each of
 * the `sharers` other members it has known (0 alone, or with more than SHARE_MAX_MEMBERS − 1).
 */
export function ownerLimit(algorithmCode: number, limit: number, sharers: number): number {
  if (sharers === 0 || sharers >= SHARE_MAX_MEMBERS) return limit;
  return limit - sharers * shareOf(algorithmCode, limit);
}

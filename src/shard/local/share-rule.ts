import { algorithmByName } from "../../algorithms/index.js";

const FIXED_WINDOW = algorithmByName("fixed-window")!.code;

/**
 * Shares of a key's quota that members other than its owner may answer from without asking
 * (docs/shares.md; shard/cluster/leases/). For a fixed-window limit of at least
 * SHARE_MIN_LIMIT and a window of at most SHARE_MAX_WINDOW_S, each member the owner holds back
 * for (a "holder": it asked, and the owner said yes) may answer `shareOf(limit)` requests of
 * each window on its own, and the owner decides its own requests (its front end's, forwarded
 * ones, batches) against the limit minus one share per holder (ownerLimitAt). The shares count
 * as used from the window's first moment, so the members together never admit more than the
 * limit; a share a member does not use is lost for that window (under-admitted).
 */

/** Each holder's share: 1/128 of the limit (2 % of it held back on a 3-node ring). */
export const SHARE_DIVISOR = 128;
/** Smaller limits are not shared: a share would hold fewer than 16 requests. */
export const SHARE_MIN_LIMIT = 2048;
/** An owner holds back for at most this many members less one (itself), and admits none while its ring is larger. */
export const SHARE_MAX_MEMBERS = 16;
/**
 * Longer windows have no share by rule (grants only: docs/shares.md). It bounds how long an
 * owner keeps holding back for a member whose connection closed (leases/holders.ts): a
 * window that began before the member could last have answered ends within this time.
 */
export const SHARE_MAX_WINDOW_S = 3600;

/** Requests a member may answer from its share of one window of `limit`, 0 when the limit is not shared. */
export function shareOf(algorithmCode: number, limit: number): number {
  return algorithmCode === FIXED_WINDOW && limit >= SHARE_MIN_LIMIT ? Math.floor(limit / SHARE_DIVISOR) : 0;
}

/** Whether a window of `durationS` seconds has shares by rule (else only grants, counted on the owner at once). */
export function ruledWindow(durationS: number): boolean {
  return durationS <= SHARE_MAX_WINDOW_S;
}

/** The members an owner holds back one share for, in the window starting at `windowStart` (unix ms, its clock). */
export interface Sharers {
  countAt(windowStart: number): number;
}

/** A node alone: it holds back nothing. */
export const NO_SHARERS: Sharers = Object.freeze({ countAt: () => 0 });

/**
 * The limit the owner decides its own requests against at `now`: `limit` less one share for
 * each holder of the window's start. Invariant (docs/shares.md): every member that may answer
 * a share by rule of this window is counted here for the whole window.
 */
export function ownerLimitAt(algorithmCode: number, limit: number, durationS: number, now: number, sharers: Sharers): number {
  const share = shareOf(algorithmCode, limit);
  if (share === 0 || !ruledWindow(durationS)) return limit;
  const D = durationS * 1000;
  return limit - sharers.countAt(now - (now % D)) * share;
}

/** `limit` less `sharers` shares: a member's estimate of what the owner had for itself (the owner told `sharers`). */
export function ownerLimit(algorithmCode: number, limit: number, sharers: number): number {
  return limit - sharers * shareOf(algorithmCode, limit);
}

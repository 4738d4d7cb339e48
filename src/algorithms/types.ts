/**
 * The contract every algorithm implements. Algorithms are pure: they read only their
 * arguments (the clock arrives as `now`), and write their answer into a caller-owned
 * `Step` so the hot path allocates nothing per decision.
 *
 * Time is integer milliseconds throughout. All state values are integers held in
 * doubles; they stay exact while limit × duration_ms ≤ 2^53 (limit × duration ≤ 9×10¹²
 * request-seconds, e.g. 1,000,000 per 104 days). Beyond that the arithmetic is still
 * correct to well under a millisecond, but no longer exact to the millisecond.
 */
/**
 * A stored limit state: three numbers whose meaning belongs to the algorithm.
 * Kept as plain numbers so the state table can hold them in typed arrays.
 */
export interface LimitState {
  a: number;
  b: number;
  c: number;
}

/** The outcome of one request against one state. */
export interface Step extends LimitState {
  allowed: boolean;
  /** requests that would still be allowed right now, after this one */
  remaining: number;
  /** unix ms at which the key is back to its full limit if nothing else arrives (= state expiry) */
  resetMs: number;
  /** blocked only: the shortest wait in whole ms after which the request (its whole cost) is allowed; 0 when allowed */
  retryAfterMs: number;
  /** charge only: what the state counts against the limit after it, in requests (above the limit: debt) */
  used: number;
  /** when allowed with a cost above 0, the state to store (a, b, c) */
}

/**
 * What a state from another node is checked against before it is merged (Algorithm.checkAged).
 * The caller passes the request contract's bounds: algorithms know no contract.
 */
export interface AgedBounds {
  /** the largest limit a request may carry: a bucket's limit above it is refused */
  readonly maxLimit: number;
  /** the longest window, ms */
  readonly maxDurationMs: number;
  /** how far ahead of its send a state may be stamped (a negative age), ms */
  readonly ageToleranceMs: number;
}

/** A peer's state judged: sound (and clamped), already equivalent to no state, or impossible. */
export type AgedVerdict = "ok" | "expired" | "invalid";

export interface Algorithm<Name extends string = string> {
  /** what a request names it by (docs/api.md) */
  readonly name: Name;
  /**
   * Stable small integer (0-9: one digit of a state key, shard/ring/state-key.ts): the peer
   * wire's `u8 algorithm`, the hand-off's and the snapshots' encoding. Never reused.
   */
  readonly code: number;
  /**
   * Decide one request that weighs `cost` (default 1; the caller keeps 0 ≤ cost ≤ limit).
   * It is allowed when the whole cost fits now, and then counts as `cost` requests of
   * weight 1 made at `now` would, one after another. `state` is null when the key has no
   * stored state.
   *
   * `cost` 0 is a peek: allowed when a request of cost 1 would be, with `remaining` and
   * `resetMs` as the state stands, and nothing to store.
   *
   * On a blocked request, or any request of cost 0, nothing is counted: `out.a/b/c` are
   * left meaningless and the caller must not store them.
   */
  step(state: Readonly<LimitState> | null, limit: number, durationMs: number, now: number, out: Step, cost?: number): void;
  /**
   * Count `cost` whatever remains (docs/api.md, POST /limit/charge; RLS hits counted as
   * envoyproxy/ratelimit counts them). A positive cost may take the state past its limit:
   * debt, held exactly (a window's until it no longer weighs, a bucket's until refilled or
   * drained). A negative cost is a refund: a count never goes below zero, a token bucket never
   * above full. Debt is bounded so that it never outlives two windows (the reach of an
   * expiry that records check): a window's count saturates at MAX_COUNT, a token bucket owes
   * at most one whole bucket, a leaky bucket holds at most two.
   *
   * `out.allowed`: the state after it is not past the limit (count ≤ limit), so cost 0 is a
   * check that counts nothing and passes at exactly the limit, as envoyproxy/ratelimit's does.
   * `out.used`: what it counts after it. `remaining`, `retryAfterMs` (when a request of 1 is
   * allowed; 0: now) and `resetMs` are what a peek of the state after it answers. `out.a/b/c`
   * always hold the state after it; the caller stores them unless cost is 0.
   */
  charge(state: Readonly<LimitState> | null, limit: number, durationMs: number, now: number, out: Step, cost: number): void;
  /**
   * Combine two states of one key that counted disjoint sets of requests (a key whose
   * owner changed), so that the result forgets no request either side counted and
   * counts none twice. Writes into `out`; `out` may alias `x`.
   */
  merge(x: Readonly<LimitState>, y: Readonly<LimitState>, durationMs: number, now: number, out: LimitState): void;
  /**
   * Combine two copies of ONE history (a replica and its owner's state, a snapshot and
   * the live state): keep the further advanced of the two, window by window, so no
   * request is counted twice. A join: commutative, associative and idempotent, so a copy
   * applied twice, or in any order, changes nothing. Writes into `out`; `out` may alias `x`.
   */
  mergeCopies(x: Readonly<LimitState>, y: Readonly<LimitState>, durationMs: number, now: number, out: LimitState): void;
  /**
   * Give back `cost` counted at `countedAt` (a reservation released: docs/api.md), writing
   * into `out`, which may alias `state`. Windows take it off the window it was counted in,
   * if that window still weighs; buckets give back what has not drained or refilled since.
   * For a bucket that would have been full meanwhile without it, that gives back up to
   * limit × (now − countedAt) / D tokens more than were taken; holds last milliseconds.
   */
  refund(state: Readonly<LimitState>, cost: number, countedAt: number, durationMs: number, now: number, out: LimitState): void;
  /** unix ms at which `state` becomes equivalent to no state at all */
  expiresAt(state: Readonly<LimitState>, limit: number, durationMs: number): number;
  /**
   * The state as it leaves this node at `now` (a hand-off, a replica, a snapshot), before
   * toAges: what this node alone may hold is put as another node must read it. A
   * window carried into a later one (fromAges) leaves as begun at `now` (ages.ts windowLeaving),
   * so no state on the wire or on disk is stamped after its send. Writes into `out`, which may
   * alias `state`; returns how many ms earlier its times were put (0: none), by which the
   * caller moves the state's expiry back too (it ends as a state begun then would).
   */
  leaving(state: Readonly<LimitState>, now: number, out: LimitState): number;
  /**
   * The state with each time in it replaced by its age at `now` (ms before `now`, negative
   * for a time after it), for another node to read on its own clock with `fromAges`: nodes'
   * clocks differ, ages do not (docs/peer-protocol.md). Writes into `out`, which may alias `state`.
   */
  toAges(state: Readonly<LimitState>, now: number, out: LimitState): void;
  /**
   * The inverse, on the reader's clock `now`. Buckets keep each age exactly; windows, which
   * each node aligns to its own clock, keep how many whole windows ago they began, or are
   * carried into the reader's next window when the sender's would end after the reader's
   * current one (ages.ts windowFromAges).
   * Writes into `out`, which may alias `aged`.
   */
  fromAges(aged: Readonly<LimitState>, durationMs: number, now: number, out: LimitState): void;
  /**
   * Judge a state another node sent (a hand-off, a replica), its times as ages (toAges),
   * before fromAges puts it on this node's clock: values of the right sign and within what
   * the algorithm can reach for a window of `durationMs`, ages no further ahead than
   * bounds.ageToleranceMs. Counts and levels beyond their reach are clamped in place (a
   * forged count must not block a key for centuries). "expired": already equivalent to no
   * state. The caller has checked that a, b and c are integers and the duration is in bounds.
   */
  checkAged(aged: LimitState, durationMs: number, bounds: AgedBounds): AgedVerdict;
}

export function newStep(): Step {
  return { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: 0, used: 0, a: 0, b: 0, c: 0 };
}

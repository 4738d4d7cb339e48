import type { DegradedReason } from "../../../decision.js";
import type { HashRing } from "../../ring/ring.js";

/**
 * What the ownership rule needs to know about the cluster at the moment of a decision.
 * Read-only here; the member pool and the coordinator own and advance it.
 */
export interface OwnershipView {
  readonly self: string;
  /** members this node believes alive; replaced, never mutated */
  readonly ring: HashRing;
  /** leaving: this node's states are moving, none is decided here any more */
  readonly frozen: boolean;
  /** just started: a key whose state has not arrived yet is not decided on a partial state */
  readonly joining: boolean;
  /** whether this node holds the key's state for this limit (see `joining`) */
  holds(algorithmCode: number, duration: number, ringKey: string): boolean;
  /** unix ms until which `member`, recently added to the ring, is fenced (see JOIN_FENCE_MS) */
  fencedUntil(member: string): number | undefined;
  /** whether the connection to `member` is up */
  isUp(member: string): boolean;
  /** unix ms until which a member dropped from the ring may still be deciding its keys (TAKEOVER_HOLD_MS); 0: none */
  readonly doubtUntil: number;
  /** whether `ringKey` belonged, before the drop, to a member still in doubt at `now` (membership/owner-doubts.ts) */
  ownerInDoubt(ringKey: string, now: number): boolean;
  /**
   * This node found members it cannot agree with on any key (another PEERS list, no shared
   * protocol version) and lacks a majority of members it agrees with: its ring is not the
   * cluster's, and it decides no key (unset: false).
   */
  readonly apart?: boolean;
}

/** Where a request came from: this node's front end, or a peer that forwarded it here. */
export type Origin = "local" | "forwarded";

export interface DecideHere {
  readonly kind: "decide";
  /**
   * A forwarded key this node's ring gives to another member: the rings disagree (one
   * side has not seen a change yet). Decided here, never forwarded again, and the state
   * is reconciled to its owner once the rings agree.
   */
  readonly stray: boolean;
}
export interface ForwardTo {
  readonly kind: "forward";
  readonly owner: string;
}
export interface FailOpen {
  readonly kind: "fail_open";
  readonly reason: DegradedReason;
  /** for logs and the peer error a forwarding node receives */
  readonly why: string;
  /**
   * The key's count is not known here, but only ever higher than what this node holds of
   * it: a block this node holds (its table, its cache of the owner's 429s) may be answered
   * as it stands; an "allowed" may not.
   */
  readonly blockHeld?: true;
}
export type Ownership = DecideHere | ForwardTo | FailOpen;

// Verdicts are shared frozen values: the rule allocates nothing per request.
const HERE: DecideHere = Object.freeze({ kind: "decide", stray: false });
const HERE_STRAY: DecideHere = Object.freeze({ kind: "decide", stray: true });
export const LEAVING: FailOpen = Object.freeze({ kind: "fail_open", reason: "handoff", why: "leaving: this node's states are moving" });
export const JOINING: FailOpen = Object.freeze({ kind: "fail_open", reason: "handoff", why: "joining: state not here yet" });
export const MOVED: FailOpen = Object.freeze({ kind: "fail_open", reason: "handoff", why: "key moved to a joining member" });
export const APART: FailOpen = Object.freeze({
  kind: "fail_open",
  reason: "peer_unavailable",
  why: "this node's ring is not the cluster's: its members were given another PEERS list or speak no shared protocol version",
});
export const OWNER_DOWN: FailOpen = Object.freeze({ kind: "fail_open", reason: "peer_unavailable", why: "owner unreachable" });
export const IN_DOUBT: FailOpen = Object.freeze({
  kind: "fail_open",
  reason: "peer_unavailable",
  why: "owner dropped from this ring moments ago: it may still be counting",
  blockHeld: true,
});

/** One ForwardTo per member name, so forwarding allocates nothing either; cleared if names churn. */
const forwards = new Map<string, ForwardTo>();
const MAX_FORWARD_VERDICTS = 4096;

function forwardTo(owner: string): ForwardTo {
  let verdict = forwards.get(owner);
  if (verdict === undefined) {
    if (forwards.size >= MAX_FORWARD_VERDICTS) forwards.clear();
    verdict = Object.freeze({ kind: "forward", owner });
    forwards.set(owner, verdict);
  }
  return verdict;
}

/**
 * The one rule for "may this node decide this key now?", for both the local path and
 * decisions forwarded by peers:
 *
 * - The ring's owner of the key is another member:
 *   - local: forward to it, or fail open when its connection is down;
 *   - forwarded: the sender's ring gives the key to this node, this one's to `owner`. If
 *     `owner` joined recently (fenced), this node has handed (or will hand) it the key's
 *     state, and deciding here would use a partial state: fail open. Otherwise decide
 *     here (a forwarded request is never forwarded again) as a stray.
 * - Deciding here: not while leaving (the state is moving), and not while joining unless
 *   the state has already arrived.
 * - Before all of that: a key whose owner this node dropped from its ring less than
 *   TAKEOVER_HOLD_MS ago, without a sign that it stopped, is neither decided here nor sent
 *   to its next owner: that owner may be counting it all along (membership/owner-doubts.ts).
 *   A stable ring pays one comparison for this (measured in-process, 3 M calls, 3 runs at load
 *   7: median 140 → 148 ns per ownership() call, within the runs' ±30 ns noise; a forwarded
 *   decision costs ~20 µs).
 */
export function ownership(view: OwnershipView, ringKey: string, algorithmCode: number, duration: number, now: number, origin: Origin): Ownership {
  if (view.apart === true) return APART;
  if (now < view.doubtUntil && view.ownerInDoubt(ringKey, now)) return IN_DOUBT;
  const owner = view.ring.owner(ringKey);
  let stray = false;
  if (owner !== undefined && owner !== view.self) {
    if (origin === "local") return view.isUp(owner) ? forwardTo(owner) : OWNER_DOWN;
    const fence = view.fencedUntil(owner);
    if (fence !== undefined && now < fence) return MOVED;
    stray = true;
  }
  if (view.frozen) return LEAVING;
  if (view.joining && !view.holds(algorithmCode, duration, ringKey)) return JOINING;
  return stray ? HERE_STRAY : HERE;
}

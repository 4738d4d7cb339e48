import { algorithmByCode, type AgedBounds, type AgedVerdict, type LimitState } from "../../algorithms/index.js";
import { REQUEST_BOUNDS } from "../../decision.js";
import { parseStateKey, type ParsedStateKey } from "../ring/state-key.js";
import type { StoredState } from "../table/state-table.js";
import { rebaseState, type AgedState } from "./state-records.js";

/*
 * A state record that comes from outside this node's own table is checked like what callers
 * send (docs/peer-protocol.md, "Peers' data"; docs/durability.md): a peer's hand-off or
 * replica, and a snapshot read back from STATE_DIR. An authenticated peer may be buggy or run
 * by someone who stole the cluster secret; a snapshot may be from a build with a bug, or
 * written by someone who got the key. One bad number must not block a key for centuries,
 * make it unlimited, or reach a caller as NaN. One check for both: checkState.
 */

const MAX_DURATION_MS = REQUEST_BOUNDS.duration.max * 1000;

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
const AGED_BOUNDS: AgedBounds = Object.freeze({ maxLimit: REQUEST_BOUNDS.chargeLimit.max, maxDurationMs: MAX_DURATION_MS, ageToleranceMs: AGE_TOLERANCE_MS });

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
  return parsed === undefined ? "invalid" : checkParsed(parsed, state);
}

/** checkState on a key parseStateKey took apart: parsed once per record on the receive path. */
function checkParsed({ algorithmCode, duration, ringKey }: ParsedStateKey, state: Omit<AgedState, "origin" | "bornAgoS">): StateVerdict {
  const algorithm = algorithmByCode(algorithmCode);
  if (algorithm === undefined || !(duration >= REQUEST_BOUNDS.duration.min && duration <= REQUEST_BOUNDS.duration.max)) return "invalid";
  // Canonical by parseStateKey (one digit, then the duration as String() writes it, a colon): stateKeyOf rebuilt it.
  if (!validRingKey(ringKey)) return "invalid";
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
  const parsed = parseStateKey(key);
  const verdict = parsed === undefined ? "invalid" : checkParsed(parsed, aged);
  if (verdict !== "ok") return verdict;
  return rebaseState(parsed!.algorithmCode, parsed!.duration * 1000, aged, now);
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

const ages: LimitState = { a: 0, b: 0, c: 0 };

/**
 * A snapshot's record (this node's clock, absolute times: state-records.ts) checked as a
 * peer's would be at `now`: its times turned into ages at `now` (a record stamped after
 * `now`, or expiring more than two windows after it, is out of bounds like a peer's), then
 * checkState, then put back on the clock (rebaseState, which keeps a window in its window
 * and a bucket's level exactly).
 */
export function admitSnapshotState(key: string, stored: StoredState, now: number): StoredState | Exclude<StateVerdict, "ok"> {
  const parsed = parseStateKey(key);
  const algorithm = parsed && algorithmByCode(parsed.algorithmCode);
  if (algorithm === undefined) return "invalid";
  algorithm.toAges(stored, now, ages);
  const aged: AgedState = {
    a: ages.a,
    b: ages.b,
    c: ages.c,
    expiresInS: Math.max(0, Math.ceil(stored.expiresAt - now / 1000)),
    origin: stored.origin,
    bornAgoS: Math.max(0, Math.floor(now / 1000) - stored.born),
  };
  return admitState(key, aged, now);
}

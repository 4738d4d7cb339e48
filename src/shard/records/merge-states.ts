import { algorithmByCode, type LimitState } from "../../algorithms/index.js";
import { parseStateKey } from "../ring/state-key.js";
import type { StoredState, StateTable } from "../table/state-table.js";
import type { StateRecord } from "./state-records.js";

/**
 * Merge states that arrive from elsewhere (a hand-off, a replica promoted, a snapshot)
 * into `table`, so that no request is forgotten and none is counted twice:
 *
 * - same origin: the two are copies of one history (a replica or snapshot of the state
 *   this node already holds, a stale owner's copy coming back after a pause). They merge
 *   by `mergeCopies`, which keeps the further advanced copy window by window. Applying a
 *   copy twice, or an older copy after a newer one, changes nothing.
 * - different origins: the two counted disjoint requests (a node decided a key while the
 *   rings disagreed; a hand-off sender deletes what it sends). They merge by `merge`,
 *   which adds what both consumed. The result keeps the receiver's origin.
 *
 * Records that expired by `now` are skipped. Returns how many records were applied.
 */
export function mergeStates(table: StateTable, records: readonly StateRecord[], now: number): number {
  let count = 0;
  for (const { key, state } of records) if (mergeState(table, key, state, now)) count++;
  return count;
}

const merged: LimitState = { a: 0, b: 0, c: 0 };

/** One record of mergeStates; false when the record's key names no algorithm or it has expired. */
export function mergeState(table: StateTable, key: string, state: StoredState, now: number): boolean {
  const parsed = parseStateKey(key);
  const algorithm = parsed && algorithmByCode(parsed.algorithmCode);
  if (parsed === undefined || algorithm === undefined) return false;
  if (state.expiresAt * 1000 <= now) return false;
  // Reset here a moment ago and this state began before it: its counts must not come back.
  // One begun after the reset holds only requests counted since: it is merged like any other.
  if (table.countedBeforeReset(parsed.ringKey, state.born, now)) return true;
  const existing = table.get(key);
  if (existing === undefined) {
    table.set(key, state);
    return true;
  }
  const D = parsed.duration * 1000;
  if (existing.origin === state.origin) algorithm.mergeCopies(existing, state, D, now, merged);
  else algorithm.merge(existing, state, D, now, merged);
  // Buckets keep their limit in `c`; the windows ignore the limit argument.
  const expiresAt = Math.max(existing.expiresAt, state.expiresAt, Math.ceil(algorithm.expiresAt(merged, merged.c || 1, D) / 1000));
  // The later birth: a history begun after a reset keeps all it holds (erring towards counting).
  table.set(key, { a: merged.a, b: merged.b, c: merged.c, expiresAt, origin: existing.origin, born: Math.max(existing.born, state.born) });
  return true;
}

/**
 * Keep a replica state sent by a member. Invariant: a replica holds what its owner holds, a
 * replication lag behind, so a copy promoted counts what the owner counted, no more.
 *
 * - From the key's owner on this node's ring (`fromOwner`), the state replaces the copy
 *   whatever it counts: the owner is the authority over its history, and a refund (POST
 *   /limit/charge with a negative cost, a reservation released, a grant given back) lowers a
 *   count that keeping the further advanced copy would hold at its higher value, to come back
 *   when this copy is promoted (a debt paid back owed again). The owner's calls reach this
 *   node in order and are applied in the turn each arrives, so a later copy is never
 *   overtaken by an earlier one.
 * - From another member (an owner back from a pause, its ring behind this one's): the same
 *   history keeps the further advanced copy, so its stale counts change nothing; another
 *   origin means the owner's state was replaced (it expired and began again, or a new owner
 *   took over from nothing): its state replaces the copy.
 */
export function storeReplica(table: StateTable, key: string, state: StoredState, now: number, fromOwner: boolean): boolean {
  if (state.expiresAt * 1000 <= now) return false;
  // The owner's copy replaces without a look at the one held: one index lookup per record, not two.
  const existing = fromOwner ? undefined : table.get(key);
  if (existing === undefined || existing.origin !== state.origin) {
    table.set(key, state);
    return true;
  }
  return mergeState(table, key, state, now);
}

import { newStep, type LimitState } from "../../algorithms/index.js";
import { newDecision, type Decision, type LimitQuery } from "../../decision.js";
import type { ItemPolicy } from "./item-policy.js";
import { ownerLimitAt, type Sharers } from "./share-rule.js";
import { stateKeyOf } from "../ring/state-key.js";
import { KEEP_ORIGIN, type StateTable, type StoredState } from "../table/state-table.js";

/** A state a batch would store, keyed by state key, and the requests it counts. */
export interface Counted {
  key: string;
  algorithmCode: number;
  /** seconds */
  duration: number;
  /** unix ms at which it was counted, for a later refund */
  at: number;
  /** total cost of the batch's items on this state */
  cost: number;
  state: StoredState;
  /** what the state has counted after them (limit − remaining): its eviction weight */
  weight: number;
}

export interface BatchDecision {
  decisions: Decision[];
  allowed: boolean;
  /** every state the batch counts, in first-touched order: what a commit writes (empty when not allowed) */
  counted: Counted[];
  /**
   * With `standing` asked for: each item as a peek before the batch would see it (what a
   * refused batch answers for its items that passed). When the batch is refused here, these
   * are `decisions` themselves.
   */
  standing?: Decision[];
}

/**
 * Decide `queries` (ring keys already computed) all or nothing against `table`, in one
 * synchronous step, so nothing can interleave. Items are decided in order, each against
 * the state the items before it would leave (two items on one state count against each
 * other), in a small overlay; the table is written only when `commit` is set and every
 * item is allowed.
 *
 * In a batch that is refused, items that would have passed are answered as a peek would
 * (remaining and count as they stand: nothing was counted), and blocked items carry the
 * wait until they would fit after the batch's items before them.
 */
export function decideBatchOn(
  table: StateTable,
  /** the members the owner holds back for (LocalDecider.sharers): items are decided against ownerLimitAt */
  sharers: Sharers,
  queries: readonly LimitQuery[],
  ringKeys: readonly string[],
  now: number,
  commit: boolean,
  standing = false,
  items?: readonly ItemPolicy[],
): BatchDecision {
  const step = newStep();
  const overlay = new Map<string, Counted>();
  const decisions: Decision[] = [];
  let allowed = true;
  for (let i = 0; i < queries.length; i++) {
    const item = items?.[i];
    const q = effective(queries[i]!, item);
    if (item?.denied === true) {
      const d = toDecision(false, 0, now + q.duration * 1000, q.duration * 1000);
      decisions.push(withPolicy(d, item));
      if (!d.allowed) allowed = false;
      continue;
    }
    const key = stateKeyOf(q.algorithm.code, q.duration, ringKeys[i]!);
    const pending = overlay.get(key);
    const state: LimitState | null = pending !== undefined ? pending.state : (table.get(key) ?? null);
    const D = q.duration * 1000;
    const limit = ownerLimitAt(q.algorithm.code, q.limit, q.duration, now, sharers);
    q.algorithm.step(state, limit, D, now, step, q.cost);
    const d = withPolicy(toDecision(step.allowed, step.remaining, step.resetMs, step.retryAfterMs), item);
    decisions.push(d);
    if (!step.allowed) {
      // In shadow, a block is answered allowed and the batch goes on; nothing of it is counted.
      if (!d.allowed) allowed = false;
      continue;
    }
    if (q.cost === 0) continue;
    const expiresAt = Math.ceil(step.resetMs / 1000);
    if (pending !== undefined) {
      pending.state = { a: step.a, b: step.b, c: step.c, expiresAt, origin: KEEP_ORIGIN, born: Math.floor(now / 1000) };
      pending.cost += q.cost;
      pending.weight = limit - step.remaining;
    } else {
      overlay.set(key, {
        key,
        algorithmCode: q.algorithm.code,
        duration: q.duration,
        at: now,
        cost: q.cost,
        state: { a: step.a, b: step.b, c: step.c, expiresAt, origin: KEEP_ORIGIN, born: Math.floor(now / 1000) },
        weight: limit - step.remaining,
      });
    }
  }
  if (!allowed) {
    // Nothing is counted: items that passed show the state as it stands.
    const views = standingViews(table, sharers, queries, ringKeys, now, decisions, items);
    return { decisions: views, allowed, counted: [], ...(standing ? { standing: views } : {}) };
  }
  const before = standing ? standingViews(table, sharers, queries, ringKeys, now, decisions, items) : undefined;
  const counted = [...overlay.values()];
  if (commit) for (const c of counted) table.set(c.key, c.state, c.weight);
  return { decisions, allowed, counted, ...(before !== undefined ? { standing: before } : {}) };
}

/** `decisions` with each allowed item replaced by a peek at the table as it stands (blocked ones kept). */
function standingViews(
  table: StateTable,
  sharers: Sharers,
  queries: readonly LimitQuery[],
  ringKeys: readonly string[],
  now: number,
  decisions: readonly Decision[],
  items: readonly ItemPolicy[] | undefined,
): Decision[] {
  const step = newStep();
  return decisions.map((d, i) => {
    if (!d.allowed || d.shadow) return d;
    const q = effective(queries[i]!, items?.[i]);
    q.algorithm.step(
      table.get(stateKeyOf(q.algorithm.code, q.duration, ringKeys[i]!)) ?? null,
      ownerLimitAt(q.algorithm.code, q.limit, q.duration, now, sharers),
      q.duration * 1000,
      now,
      step,
      0,
    );
    const view = toDecision(true, step.remaining, step.resetMs, 0);
    view.applied = d.applied;
    return view;
  });
}

/** The item as the owner decides it: its override's limit, window and algorithm in place of its own. */
function effective(q: LimitQuery, item: ItemPolicy | undefined): LimitQuery {
  const a = item?.applied;
  if (a === undefined || a === null) return q;
  return { namespace: q.namespace, identifier: q.identifier, limit: a.limit, duration: a.duration, algorithm: a.algorithm, cost: q.cost };
}

/** The decision with what the item's policy says: the applied limit, and a block let through in shadow. */
function withPolicy(d: Decision, item: ItemPolicy | undefined): Decision {
  if (item === undefined) return d;
  d.applied = item.applied;
  if (item.shadow && !d.allowed) {
    d.allowed = true;
    d.shadow = true;
    d.retryAfterMs = 0;
  }
  return d;
}

function toDecision(allowed: boolean, remaining: number, resetMs: number, retryAfterMs: number): Decision {
  const d = newDecision();
  d.allowed = allowed;
  d.remaining = remaining;
  d.resetTime = Math.ceil(resetMs / 1000);
  d.retryAfterMs = retryAfterMs;
  return d;
}

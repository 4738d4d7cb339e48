import { algorithmByName, newStep, type Algorithm } from "../../algorithms/index.js";
import { newDecision, type AppliedLimit, type BatchOutcome, type Decider, type Decision, type ResetOutcome, type ResetQuery } from "../../decision.js";
import type { LimitQuery, ReleaseOutcome, ReleaseQuery } from "../../decision.js";
import { concurrency } from "../../algorithms/concurrency.js";
import { releaseOnOwner } from "./release.js";
import { ReleasedLeases } from "./released-leases.js";
import { FineStore } from "./fine-store.js";
import type { Policy } from "../../policy/types.js";
import { decideBatchOn } from "./batch.js";
import { itemPoliciesOf } from "./item-policy.js";
import { Reservations } from "./reservations.js";
import { ResetQueue } from "./reset-queue.js";
import { NO_SHARERS, ownerLimitAt, shareOf, type Sharers } from "./share-rule.js";
import { ringKeyOf, stateKeyOf } from "../ring/state-key.js";
import type { StateTable } from "../table/state-table.js";
import { ChargeIds, chargeIdKey } from "./charge-ids.js";
import { CHARGE_ID_MEMORY_MS } from "../../decision.js";

/** One decision of the owner, on fields (a forwarded item has no LimitQuery). */
type DecideItem = (
  namespace: string,
  identifier: string,
  ringKey: string,
  algorithm: Algorithm,
  limit: number,
  duration: number,
  now: number,
  cost: number,
  overridable: boolean,
  charge: boolean,
) => Decision;

/**
 * Decides from this node's own state table, with the policy this node holds (docs/policy.md,
 * Overrides): every key is decided on its owner, so the owner's policy is the one applied,
 * whichever member the request came in by. Synchronous.
 */
export class LocalDecider implements Decider {
  private readonly step = newStep();
  private readonly decision = newDecision();
  /** the applied limit of the last overridden decision: valid as long as `decision` is */
  private readonly applied: AppliedLimit = { limit: 0, duration: 0, algorithm: undefined as unknown as Algorithm };
  private policy: Policy | undefined = undefined;
  private shadowMode = false;
  /**
   * The members this owner holds back a share for (share-rule.ts; the cluster's
   * leases/holders.ts): it decides against the limit less their shares. None alone.
   */
  sharers: Sharers = NO_SHARERS;
  /**
   * Called after a refund of a key this node decided: other members may remember the key's
   * 429 (BlockedCache), which a refund can end before its time. Set by the cluster.
   */
  refunded: ((ringKey: string) => void) | undefined = undefined;
  /**
   * Called when a charge takes a key that members answer from their shares (share-rule.ts)
   * past its limit, with the start of the window it is in debt in: they answer nothing of it
   * from their shares from then on (docs/shares.md, Debt). Set by the cluster.
   */
  indebted: ((stateKey: string, windowStart: number) => void) | undefined = undefined;

  /** one owner's parts of batches across owners, held until committed or released */
  readonly reservations: Reservations;
  /** resets of this table, a budget per turn (reset-queue.ts): for POST /limit/reset here and RESET from peers */
  readonly resets: ResetQueue;

  /** concurrency leases released and not yet lapsed: a second release of one frees nothing (released-leases.ts) */
  readonly released: ReleasedLeases;
  /** the second each granted concurrency slot lapses in (fine-store.ts): leases lapse within 1 s of `duration` */
  readonly fineLapses: FineStore;

  /** an answer recalled from `chargeIds`, with the same validity as `decision` */
  private readonly recalled = newDecision();

  /**
   * `releasedBytes`: the byte bound of the memory of released leases, `fineBytes` of the fine
   * lapses of held ones (memory-budget.ts, each its own line); `chargeIds`: the memory of
   * charges with an id (charge-ids.ts).
   */
  constructor(
    readonly table: StateTable,
    releasedBytes = 512 * 1024,
    readonly chargeIds = new ChargeIds(1024 * 1024, CHARGE_ID_MEMORY_MS),
    fineBytes = 512 * 1024,
  ) {
    this.released = new ReleasedLeases(releasedBytes);
    this.fineLapses = new FineStore(fineBytes);
    this.reservations = new Reservations(table);
    this.resets = new ResetQueue(table);
  }

  /**
   * The policy in force: swapped in one assignment (a reload), so a decision sees the old
   * policy or the new one, and the new one applies from the next decision. Which path
   * decides is chosen here, once: with no override loaded and SHADOW_MODE off, decisions
   * go straight to the table and look nothing up.
   */
  setPolicy(policy: Policy | undefined, shadowMode: boolean): void {
    this.policy = policy;
    this.shadowMode = shadowMode;
    this.decideItem = shadowMode || (policy !== undefined && policy.overrideCount > 0) ? this.decideWithPolicy : this.decidePlain;
  }

  /** Whether this node's policy may change what `query` is decided against (an override, SHADOW_MODE): only its owner answers it then. */
  mayChange(query: LimitQuery): boolean {
    return this.shadowMode || (query.overridable === true && this.policy !== undefined && this.policy.overrideCount > 0);
  }

  /** the policy and SHADOW_MODE, as batches read them */
  get policyInForce(): { readonly policy: Policy | undefined; readonly shadowMode: boolean } {
    return { policy: this.policy, shadowMode: this.shadowMode };
  }

  decide(query: LimitQuery, now: number, done: (decision: Decision) => boolean): void {
    done(this.decideSync(query, now));
  }

  decideSync(query: LimitQuery, now: number): Decision {
    return this.decideNow(query, ringKeyOf(query.namespace, query.identifier), now);
  }

  decideNow(query: LimitQuery, ringKey: string, now: number): Decision {
    if (query.chargeId !== undefined && query.charge === true) {
      const { namespace, identifier, algorithm, limit, duration, cost, overridable } = query;
      return this.decideOnce(namespace, identifier, ringKey, algorithm, limit, duration, now, cost, overridable === true, query.chargeId);
    }
    return this.decideItem(
      query.namespace,
      query.identifier,
      ringKey,
      query.algorithm,
      query.limit,
      query.duration,
      now,
      query.cost,
      query.overridable === true,
      query.charge === true,
    );
  }

  /** The owner's decision of one item, local or forwarded by a peer: the path setPolicy chose. */
  decideItem: DecideItem = (namespace, identifier, ringKey, algorithm, limit, duration, now, cost, _overridable, charge) =>
    this.decideKey(ringKey, algorithm, limit, duration, now, cost, charge);

  private readonly decidePlain: DecideItem = this.decideItem;

  /**
   * A charge with an id, local or forwarded by a peer (docs/api.md, Charge ids). Invariant: a
   * charge with an id is counted at most once by this owner while its id is remembered
   * (CHARGE_ID_MEMORY_MS): a second one with the same id, for the same state (namespace,
   * identifier, asked algorithm and window), gets the first one's answer, `duplicate`, and
   * counts nothing. An id that does not fit the memory is refused before anything is counted
   * (degraded "internal": not counted), so an id is never forgotten early to make room.
   */
  decideOnce(
    namespace: string,
    identifier: string,
    ringKey: string,
    algorithm: Algorithm,
    limit: number,
    duration: number,
    now: number,
    cost: number,
    overridable: boolean,
    chargeId: string,
  ): Decision {
    const key = chargeIdKey(chargeId, stateKeyOf(algorithm.code, duration, ringKey));
    const known = this.chargeIds.recall(key, now, this.recalled);
    if (known !== undefined) return known;
    const bytes = this.chargeIds.fits(key, now);
    if (bytes < 0) {
      const d = this.recalled;
      d.degraded = "internal";
      d.duplicate = false;
      return d;
    }
    const d = this.decideItem(namespace, identifier, ringKey, algorithm, limit, duration, now, cost, overridable, true);
    this.chargeIds.remember(key, d, now, bytes);
    d.duplicate = false;
    return d;
  }

  /**
   * For a POST /limit key (`overridable`), the most specific override applied: its limit, window and algorithm replace the
   * asked ones (a changed window or algorithm is another state: a fresh count; a changed
   * limit keeps what was counted). Limit 0, or a cost above the applied limit, is blocked
   * without touching a state. Shadow (the entry's or SHADOW_MODE): decided and counted as
   * usual, a block answered allowed.
   */
  private readonly decideWithPolicy: DecideItem = (namespace, identifier, ringKey, algorithm, limit, duration, now, cost, overridable, charge) => {
    // An RLS descriptor's key: its rules govern it, not overrides.
    if (!overridable) return this.decideKey(ringKey, algorithm, limit, duration, now, cost, charge);
    const o = this.policy?.matchOverride(namespace, identifier);
    let d: Decision;
    let shadow = this.shadowMode;
    if (o === undefined) d = this.decideKey(ringKey, algorithm, limit, duration, now, cost, charge);
    else {
      if (o.shadow) shadow = true;
      if (o.limit === undefined) d = this.decideKey(ringKey, algorithm, limit, duration, now, cost, charge);
      else {
        const a = this.applied;
        a.limit = o.limit;
        a.duration = o.duration ?? duration;
        a.algorithm = o.algorithm === undefined ? algorithm : algorithmByName(o.algorithm)!;
        // A charge is counted against the applied limit whatever it costs (only a deny list refuses it).
        const deny = a.limit === 0 || (!charge && cost > a.limit);
        d = deny ? this.denied(a.duration, now) : this.decideKey(ringKey, a.algorithm, a.limit, a.duration, now, cost, charge);
        d.applied = a;
      }
    }
    if (shadow && !d.allowed) {
      d.allowed = true;
      d.shadow = true;
      d.retryAfterMs = 0;
    }
    return d;
  };

  /** The entry point for decisions forwarded by peers: they arrive as fields, with no LimitQuery. */
  decideKey(ringKey: string, algorithm: Algorithm, limit: number, duration: number, now: number, cost = 1, charge = false): Decision {
    const step = this.step;
    const shared = charge && shareOf(algorithm.code, limit) !== 0;
    limit = ownerLimitAt(algorithm.code, limit, duration, now, this.sharers);
    const stateKey = stateKeyOf(algorithm.code, duration, ringKey);
    // A concurrency slot is decided through its key's fine lapses when the store has room (fine-store.ts).
    const fine = algorithm === concurrency && !charge ? this.fineLapses.useForStep(stateKey, duration * 1000) : undefined;
    this.table.decide(stateKey, fine === undefined ? algorithm : this.fineLapses.algorithm, limit, duration * 1000, now, step, cost, charge);
    if (fine !== undefined) this.fineLapses.settle(stateKey);
    if (charge && cost < 0) this.refunded?.(ringKey);
    // Into debt from within the limit (a fixed window: the count before is what it counts less
    // the cost): members answer from their shares no more. Once per crossing, not per charge.
    // The window named is the one the charge was counted in (it ends at resetMs), which is a
    // later one than now's when a skewed hand-off carried the count (algorithms/ages.ts).
    else if (shared && step.used > limit && step.used - cost <= limit) this.indebted?.(stateKey, step.resetMs - duration * 1000);
    const d = this.decision;
    d.allowed = step.allowed;
    d.remaining = step.remaining;
    // An allowed slot's reset is its lease's own lapse second, which the lease carries (the table
    // keeps the buckets' last lapse as the state's expiry).
    d.resetTime = fine !== undefined && step.allowed && cost > 0 && this.fineLapses.leaseS > 0 ? this.fineLapses.leaseS : Math.ceil(step.resetMs / 1000);
    d.retryAfterMs = step.retryAfterMs;
    d.debt = charge ? Math.max(0, step.used - limit) : 0;
    d.degraded = null;
    d.applied = null;
    d.shadow = false;
    return d;
  }

  /**
   * Blocked by the policy itself (limit 0, or a cost the applied limit can never hold): no
   * state read or written. The wait is the applied window: a caller that retries after it
   * asks again, under whatever policy is in force then.
   */
  private denied(duration: number, now: number): Decision {
    const d = this.decision;
    d.allowed = false;
    d.remaining = 0;
    d.resetTime = Math.ceil((now + duration * 1000) / 1000);
    d.retryAfterMs = duration * 1000;
    d.debt = 0;
    d.degraded = null;
    d.applied = null;
    d.shadow = false;
    return d;
  }

  decideBatch(queries: readonly LimitQuery[], now: number, done: (outcome: BatchOutcome) => void): void {
    const ringKeys = queries.map((q) => ringKeyOf(q.namespace, q.identifier));
    const items = itemPoliciesOf(this.policy, this.shadowMode, queries);
    done({ decisions: decideBatchOn(this.table, this.sharers, queries, ringKeys, now, true, false, items).decisions, degraded: null });
  }

  release(query: ReleaseQuery, now: number, done: (outcome: ReleaseOutcome) => void): void {
    done(this.releaseSync(query, now));
  }

  /** The owner's release of one lease (release.ts), local or forwarded by a peer. */
  releaseSync(rq: ReleaseQuery, now: number): ReleaseOutcome {
    const q = rq.query;
    return releaseOnOwner(this.table, this.released, this.fineLapses, rq, now, (ringKey) => this.decideKey(ringKey, concurrency, q.limit, q.duration, now, 1));
  }

  /** Applied by the reset queue, now or in a later turn, at the time it runs. */
  reset(query: ResetQuery, _now: number, done: (outcome: ResetOutcome) => void): void {
    this.resets.submit(ringKeyOf(query.namespace, query.identifier), query.algorithm, query.duration, (removed) => done({ ok: true, removed }));
  }
}

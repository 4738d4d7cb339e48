import { algorithmByCode } from "../../algorithms/index.js";
import type { AppliedLimit, Decision } from "../../decision.js";
import { stringBytes } from "../table/key-bytes.js";

/**
 * Bytes per remembered charge beside its key string: the Map entry (~40), the answer's record
 * (an object of ten fields: ~100) and its two places in the expiry queue (16), rounded up.
 */
const ENTRY_BYTES = 160;

interface Remembered {
  /** unix ms after which the id is forgotten */
  until: number;
  allowed: boolean;
  remaining: number;
  resetTime: number;
  retryAfterMs: number;
  debt: number;
  shadow: boolean;
  /** the override's limit, window and algorithm code the answer applied; limit -1: none */
  appliedLimit: number;
  appliedDuration: number;
  appliedAlgorithm: number;
}

/** The key a charge id is remembered by: the id first (it holds no "\n"), then the state it was counted in. */
export const chargeIdKey = (chargeId: string, stateKey: string): string => chargeId + "\n" + stateKey;

/**
 * The owner's memory of charges with an id (docs/api.md, Charge ids): what makes a retried charge
 * safe. Each id is remembered with the answer its charge got, from that charge until `memoryMs`
 * later (CHARGE_ID_MEMORY_MS), by the state it was counted in (the id, the asked algorithm and
 * window, the namespace and identifier). Callers choose the ids, so the memory is bounded in bytes
 * (`maxBytes`, a share of MAX_MEMORY_MB: memory-budget.ts), counting each key string. When an id
 * does not fit, its charge is refused, not counted (LocalDecider.decideOnce): never an id
 * forgotten early, so never a charge counted twice while its id is remembered.
 *
 * Not replicated nor handed over: a retry that reaches a new owner after an ownership change
 * (a hand-off, a replica promoted) is counted again (docs/api.md says so).
 */
export class ChargeIds {
  /** key → the answer */
  private readonly ids = new Map<string, Remembered>();
  /**
   * The keys in the order they were remembered, which is expiry order (one memoryMs for all),
   * from `head` on: the sweep pops expired ones off the front. A queue beside the Map because
   * walking a Map from its start passes the holes its deletes left until it rehashes: a sweep
   * per charge that way cost ~20 µs per charge (300,000 charges with new ids, 1 s memory),
   * ~1 µs this way.
   */
  private order: string[] = [];
  /** the `until` each key of `order` was queued with (a key remembered again is queued again) */
  private untils: number[] = [];
  private head = 0;
  bytes = 0;
  /** charges refused because their id did not fit */
  refused = 0;
  /** the applied limit of a recalled answer: valid as long as the Decision recall() filled */
  private readonly applied: AppliedLimit = { limit: 0, duration: 0, algorithm: undefined as unknown as AppliedLimit["algorithm"] };

  constructor(
    readonly maxBytes: number,
    readonly memoryMs: number,
  ) {}

  get size(): number {
    return this.ids.size;
  }

  /** The answer remembered for `key` written into `out` (duplicate), or undefined when none is remembered at `now`. */
  recall(key: string, now: number, out: Decision): Decision | undefined {
    const r = this.ids.get(key);
    if (r === undefined) return undefined;
    if (r.until <= now) {
      // Over, not yet swept: forgotten here, so remember() never finds the key already there.
      this.forget(key);
      return undefined;
    }
    out.allowed = r.allowed;
    out.remaining = r.remaining;
    out.resetTime = r.resetTime;
    out.retryAfterMs = r.retryAfterMs;
    out.debt = r.debt;
    out.degraded = null;
    out.shadow = r.shadow;
    out.duplicate = true;
    if (r.appliedLimit < 0) out.applied = null;
    else {
      const a = this.applied;
      a.limit = r.appliedLimit;
      a.duration = r.appliedDuration;
      a.algorithm = algorithmByCode(r.appliedAlgorithm)!;
      out.applied = a;
    }
    return out;
  }

  /** What remembering `key` costs (bytes) when it fits now (ids past their time are forgotten first), else -1 (a refusal, counted). */
  fits(key: string, now: number): number {
    const cost = ChargeIds.cost(key);
    this.sweep(now);
    if (this.bytes + cost <= this.maxBytes) return cost;
    this.refused++;
    return -1;
  }

  /**
   * Remember `d`, the answer of the charge named by `key`, until `memoryMs` after `now`. Only
   * after recall() found nothing and fits() gave its `cost`, in the same turn.
   */
  remember(key: string, d: Decision, now: number, cost: number): void {
    const applied = d.applied;
    this.order.push(key);
    this.untils.push(now + this.memoryMs);
    this.ids.set(key, {
      until: now + this.memoryMs,
      allowed: d.allowed,
      remaining: d.remaining,
      resetTime: d.resetTime,
      retryAfterMs: d.retryAfterMs,
      debt: d.debt,
      shadow: d.shadow,
      appliedLimit: applied === null ? -1 : applied.limit,
      appliedDuration: applied === null ? 0 : applied.duration,
      appliedAlgorithm: applied === null ? 0 : applied.algorithm.code,
    });
    this.bytes += cost;
  }

  /** Forget the ids remembered long enough (also the table's once-a-second sweep). */
  sweep(now: number): void {
    const { order, untils } = this;
    while (this.head < order.length && untils[this.head]! <= now) {
      const key = order[this.head]!;
      const r = this.ids.get(key);
      // Only if the remembered one is over too: a key remembered again has a later place as well.
      if (r !== undefined && r.until <= now) this.forget(key);
      this.head++;
    }
    if (this.head > 1024 && this.head * 2 > order.length) {
      this.order = order.slice(this.head);
      this.untils = untils.slice(this.head);
      this.head = 0;
    }
  }

  private forget(key: string): void {
    if (this.ids.delete(key)) this.bytes -= ChargeIds.cost(key);
  }

  /** What remembering `key` costs in bytes: its string as V8 lays it out and ENTRY_BYTES. */
  static cost(key: string): number {
    return stringBytes(key) + ENTRY_BYTES;
  }
}

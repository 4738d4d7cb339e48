import { algorithmByCode } from "../../algorithms/index.js";
import type { AppliedLimit, Decision } from "../../decision.js";
import { stringBytes } from "../table/key-bytes.js";

/**
 * Bytes per remembered charge beside its key string: the Map entry (~40) and the answer's
 * record (an object of ten fields: ~100), rounded up.
 */
const ENTRY_BYTES = 144;

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
  /** key → the answer; insertion order is expiry order (one memoryMs for all) */
  private readonly ids = new Map<string, Remembered>();
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
    if (r === undefined || r.until <= now) return undefined;
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

  /** Whether `key` fits now (ids past their time are forgotten first); false counts a refusal. */
  fits(key: string, now: number): boolean {
    this.sweep(now);
    if (this.bytes + ChargeIds.cost(key) <= this.maxBytes) return true;
    this.refused++;
    return false;
  }

  /** Remember `d`, the answer of the charge named by `key`, until `memoryMs` after `now`; call only when fits() said so. */
  remember(key: string, d: Decision, now: number): void {
    const applied = d.applied;
    this.forget(key);
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
    this.bytes += ChargeIds.cost(key);
  }

  /** Forget the ids remembered long enough (also the table's once-a-second sweep). */
  sweep(now: number): void {
    for (const [key, r] of this.ids) {
      if (r.until > now) break;
      this.forget(key);
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

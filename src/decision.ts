import type { Algorithm } from "./algorithms/index.js";

/** A validated request, ready for a decision. */
export interface LimitQuery {
  /** effective namespace: `namespace.slug` when a product was sent */
  namespace: string;
  identifier: string;
  limit: number;
  /** seconds */
  duration: number;
  algorithm: Algorithm;
  /** what this request weighs: 1 by default, 0 is a peek (counts nothing); never above `limit` */
  cost: number;
  /**
   * Counted whatever remains, the cost a refund when negative (Algorithm.charge): POST
   * /limit/charge, and RLS hits counted as envoyproxy/ratelimit counts them. Absent: admitted
   * only when the whole cost fits. Never in a batch.
   */
  charge?: boolean;
  /**
   * A charge's id (POST /limit/charge `charge_id`, REQUEST_BOUNDS.chargeId): the key's owner
   * counts a charge with an id at most once (shard/local/charge-ids.ts). Absent: no id.
   */
  chargeId?: string;
  /**
   * true for POST /limit and /limit/batch: the owner applies the operator's overrides and
   * shadow mode (docs/policy.md). Absent for the keys of RLS descriptors, which the RLS rules govern.
   */
  overridable?: boolean;
}

/**
 * The request contract's bounds (docs/api.md), the one source for the typia tags of the
 * request body, the 400 messages, and the check of decisions forwarded by peers. Lengths
 * count UTF-16 code units; limit and duration (seconds) are integers.
 */
export const REQUEST_BOUNDS = Object.freeze({
  namespace: { min: 1, max: 256 },
  product: { min: 1, max: 128 },
  identifier: { min: 1, max: 512 },
  limit: { min: 1, max: 1_000_000 },
  duration: { min: 1, max: 31_536_000 },
  /** and never above the request's `limit` */
  cost: { min: 0, max: 1_000_000 },
  /**
   * A charge's limit (POST /limit/charge, and the RLS door): the RLS wire's uint32
   * requests_per_unit, so token budgets fit (5,000,000 tokens an hour).
   */
  chargeLimit: { min: 1, max: 4_294_967_295 },
  /** A charge's cost: never 0 (a refund when negative), whatever the limit. */
  chargeCost: { min: -1_000_000_000, max: 1_000_000_000 },
  /** A charge's id: 1 to 64 visible ASCII characters (0x21 to 0x7E), CHARGE_ID_PATTERN. */
  chargeId: { min: 1, max: 64 },
} as const);

/**
 * What a charge id may hold (REQUEST_BOUNDS.chargeId): the typia tag of the body and the check of
 * an id forwarded by a peer. Visible ASCII only: one byte per character on the peer wire, no
 * space, no control character, nothing a log line or a key separator could be confused by.
 */
export const CHARGE_ID_PATTERN = "^[!-~]{1,64}$";
const CHARGE_ID_RE = new RegExp(CHARGE_ID_PATTERN);
/** Whether `id` is a charge id the contract accepts (a peer's is checked like a caller's). */
export const isChargeId = (id: string): boolean => CHARGE_ID_RE.test(id);
/**
 * How long (ms) a key's owner remembers a charge id and its answer by default (docs/api.md, Charge
 * ids; CHARGE_ID_MEMORY_MS). Here rather than in config.ts so that the owner's decider, which
 * needs a default, does not load the settings' loader.
 */
export const CHARGE_ID_MEMORY_MS = 120_000;

// The product slug is part of a key's effective namespace (`namespace.slug`), so the
// ring-aware client (src/client) computes it with this same code.

/**
 * The product slug (docs/api.md, Request body): Unicode NFKD, combining marks removed, lower-cased, every
 * run of characters outside [a-z0-9] replaced by "-", leading and trailing "-" trimmed.
 */
export function slugify(product: string): string {
  return product
    .normalize("NFKD")
    .replace(/\p{M}+/gu, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
}

const CACHE_LIMIT = 10_000;

/**
 * Callers send a handful of distinct products, each many times a second, and slugify costs
 * ~1 µs (normalize + three regexes). A bounded cache makes the repeat cost one Map lookup;
 * it is simply cleared when full, since products are few.
 */
export class SlugCache {
  private readonly cache = new Map<string, string>();

  get(product: string): string {
    let slug = this.cache.get(product);
    if (slug === undefined) {
      slug = slugify(product);
      if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
      this.cache.set(product, slug);
    }
    return slug;
  }
}

/** Why an answer was a fail-open one; also the `reason` label of the degraded metric. */
export const DEGRADED_REASONS = ["internal", "peer_timeout", "peer_unavailable", "peer_error", "handoff"] as const;
export type DegradedReason = (typeof DEGRADED_REASONS)[number];

/**
 * The limit an operator's override (docs/policy.md) made the owner apply instead of the
 * one asked: what the answer's limit, algorithm and RateLimit headers show.
 */
export interface AppliedLimit {
  limit: number;
  /** seconds */
  duration: number;
  algorithm: Algorithm;
}

/** The answer to one query, whoever computed it. */
export interface Decision {
  allowed: boolean;
  remaining: number;
  /** unix seconds, rounded up */
  resetTime: number;
  /** blocked only: whole ms until one request is allowed */
  retryAfterMs: number;
  /** a charge only: how far past the limit what is counted is (0 when not past it) */
  debt: number;
  /** set when this is a fail-open answer rather than a real decision */
  degraded: DegradedReason | null;
  /** the limit the owner applied when an override replaced the query's; null: the query's own */
  applied: AppliedLimit | null;
  /** allowed only because of shadow mode: the limit applied would have blocked it */
  shadow: boolean;
  /**
   * A charge with an id answered from the owner's memory of it (shard/local/charge-ids.ts): the
   * answer the first one got, and nothing counted now. Only the owner's memory and a forward of
   * a charge with an id set it true.
   */
  duplicate: boolean;
}

/**
 * The answer to an all-or-nothing batch: one decision per query, in order. Every item is
 * counted when every one is allowed, and none otherwise. `degraded` set means the batch
 * failed open as a whole (every decision is a fail-open one and nothing was counted).
 */
export interface BatchOutcome {
  decisions: Decision[];
  degraded: DegradedReason | null;
}

/** POST /limit/reset: the states of one identifier, all of them or the one named. */
export interface ResetQuery {
  namespace: string;
  identifier: string;
  algorithm: Algorithm | undefined;
  /** seconds */
  duration: number | undefined;
}

/** One removed state. */
export interface RemovedState {
  /** the algorithm's name */
  algorithm: string;
  /** seconds */
  duration: number;
}

/** A reset's answer: what was removed, or why it could not be done (the owner was not reached). */
export type ResetOutcome = { ok: true; removed: RemovedState[] } | { ok: false; reason: DegradedReason };

/**
 * POST /limit/release (docs/api.md, Concurrency): free the slot of one lease of a concurrency
 * key on its owner, and with `renew` hold a fresh one in its place. The lease's signature was
 * checked where the request came in (leases/lease-token.ts); the owner trusts these fields.
 */
export interface ReleaseQuery {
  /** the key, as acquired (algorithm concurrency) */
  query: LimitQuery;
  /** the lease's lapse, unix seconds on the clock of the owner that granted it */
  lapseS: number;
  /** the lease's identity (its signature), for the owner's memory of released leases; "": free the `query.cost` oldest slots (RLS) */
  leaseId: string;
  renew: boolean;
}

/** A release's answer: whether a slot was freed, and a renewal's new lapse (unix s; 0: none), or why the owner was not reached. */
export type ReleaseOutcome = { ok: true; released: boolean; renewedLapseS: number; remaining: number } | { ok: false; reason: DegradedReason };

/**
 * Where the front end gets decisions: the local state table, or the owning peer. `done`
 * may be called synchronously (local) or later (forwarded); the Decision object it gets
 * is only valid for the duration of the call.
 */
export interface Decider {
  /**
   * `done` returns whether the answer reached its caller: false when the caller left while the
   * decision was on its way (a forward), and the decider then gives back what it counted.
   */
  decide(query: LimitQuery, now: number, done: (decision: Decision) => boolean): void;
  /**
   * Optional: the caller behind a `done` still pending left (its connection closed). A decider
   * whose answer is made on another thread (workers/ring-decider.ts) tells that thread, so
   * that a forward's answer coming back after this is given back as on one thread, where
   * `done` returning false says it. Best effort: an answer already on its way stays counted.
   */
  left?(done: (decision: Decision) => boolean): void;
  /**
   * Optional fast path: the decision when it can be made synchronously (a key this node
   * owns), or undefined to go through decide(). Same validity as decide()'s Decision: until
   * the next call. It spares the front end a `done` closure per request.
   */
  decideSync?(query: LimitQuery, now: number): Decision | undefined;
  /** All or nothing over 1..100 queries (docs/api.md, POST /limit/batch). `done` owns the outcome. */
  decideBatch(queries: readonly LimitQuery[], now: number, done: (outcome: BatchOutcome) => void): void;
  /** Remove the states of one identifier on its owner (docs/api.md, POST /limit/reset). */
  reset(query: ResetQuery, now: number, done: (outcome: ResetOutcome) => void): void;
  /** Free a concurrency lease's slot on its owner (docs/api.md, POST /limit/release). */
  release(query: ReleaseQuery, now: number, done: (outcome: ReleaseOutcome) => void): void;
}

/** The fail-open answer (docs/api.md, Fail-open): allowed, one counted, full window ahead. */
export function failOpenDecision(query: LimitQuery, now: number, reason: DegradedReason, out: Decision): Decision {
  out.allowed = true;
  out.remaining = query.limit - 1;
  out.resetTime = Math.ceil((now + query.duration * 1000) / 1000);
  out.retryAfterMs = 0;
  out.debt = 0;
  out.degraded = reason;
  out.applied = null;
  out.shadow = false;
  out.duplicate = false;
  return out;
}

/** The fail-open answer of a whole batch: nothing counted, every item allowed. */
export function failOpenBatch(queries: readonly LimitQuery[], now: number, reason: DegradedReason): BatchOutcome {
  return { decisions: queries.map((q) => failOpenDecision(q, now, reason, newDecision())), degraded: reason };
}

export function newDecision(): Decision {
  return { allowed: false, remaining: 0, resetTime: 0, retryAfterMs: 0, debt: 0, degraded: null, applied: null, shadow: false, duplicate: false };
}

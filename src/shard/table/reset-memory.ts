import { stringBytes } from "./key-bytes.js";

/**
 * How long a reset is remembered: a state of the identifier handed over within this time
 * (a stray state reconciled to its owner, a leaving node's hand-off) was counted before
 * the reset, or at worst just after it, and is dropped rather than merged back; an answer or
 * a grant asked before a reset heard of (RESET_NOTICE) is not taken.
 */
export const RESET_MEMORY_MS = 60_000;
/** Bound on remembered resets; the oldest are forgotten first. */
const MAX_REMEMBERED_RESETS = 100_000;
/** A Map entry (key, value, chain, bucket) and its two-number record, beside its key string. */
const ENTRY_BYTES = 72;

/** What a member reads and writes of the resets its owners told it of (RESET_NOTICE): the blocked cache, the shares. */
export interface HeardResets {
  /** `ringKey`'s owner said, and this node heard at unix ms `now` (its clock), that it reset the identifier */
  hearReset(ringKey: string, now: number): void;
  /** unix ms (this node's clock) the last reset of `ringKey` was heard of, within RESET_MEMORY_MS of `now`; undefined: none */
  resetHeardAt(ringKey: string, now: number): number | undefined;
}

interface Remembered {
  /** unix ms of the reset made here (or reported by the owner: a replica's), NaN: none; a lower bound of the moment */
  at: number;
  /** unix ms this node heard of a reset from the identifier's owner, NaN: none; an upper bound of the moment */
  heard: number;
}

/**
 * The one memory of resets on a node (docs/shares.md): the ring keys reset here (merges drop
 * what was counted before: `at`) and those whose owner told this node of a reset (blocked
 * answers and grants asked before it are not taken: `heard`), within RESET_MEMORY_MS. Callers
 * choose the identifiers they reset, so it is bounded in bytes as well as entries (100,000
 * maximal ring keys would be ~150 MB): the state table gives it a share of its byte bound and
 * counts it in its `bytes`, so MAX_MEMORY_MB holds it. When a reset does not fit, the oldest
 * are forgotten first; a forgotten reset can at worst let a state counted before it be merged
 * back, or a block answered before it be kept until its window ends.
 */
export class ResetMemory implements HeardResets {
  /** ring key → its resets, remembered until RESET_MEMORY_MS after the later; insertion order is (nearly) expiry order */
  private readonly resets = new Map<string, Remembered>();
  bytes = 0;

  constructor(private readonly maxBytes: number) {}

  /** Remember a reset of `ringKey` made at unix ms `at` (now, or earlier when a peer reports it). */
  note(ringKey: string, at: number, now: number = at): void {
    // A later reset of the same identifier stands for both.
    const known = this.resets.get(ringKey);
    if (known !== undefined && known.at >= at) return;
    this.put(ringKey, at, known?.heard ?? NaN, now);
  }

  hearReset(ringKey: string, now: number): void {
    const known = this.resets.get(ringKey);
    this.put(ringKey, known?.at ?? NaN, now, now);
  }

  /** Unix ms of the remembered reset of `ringKey`, or undefined (never, or over RESET_MEMORY_MS before `now`). */
  at(ringKey: string, now: number): number | undefined {
    const r = this.resets.get(ringKey);
    return r !== undefined && now < r.at + RESET_MEMORY_MS ? r.at : undefined;
  }

  resetHeardAt(ringKey: string, now: number): number | undefined {
    const r = this.resets.get(ringKey);
    return r !== undefined && now < r.heard + RESET_MEMORY_MS ? r.heard : undefined;
  }

  /** Forget the resets remembered long enough. */
  drop(now: number): void {
    for (const [ringKey, r] of this.resets) {
      if (ResetMemory.latest(r) + RESET_MEMORY_MS > now) break;
      this.forget(ringKey);
    }
  }

  private put(ringKey: string, at: number, heard: number, now: number): void {
    // Moved to the end: the newest last, so drop() stops at the first it keeps.
    this.forget(ringKey);
    this.drop(now);
    const cost = ResetMemory.cost(ringKey);
    while (this.resets.size > 0 && (this.resets.size >= MAX_REMEMBERED_RESETS || this.bytes + cost > this.maxBytes))
      this.forget(this.resets.keys().next().value!);
    this.resets.set(ringKey, { at, heard });
    this.bytes += cost;
  }

  private forget(ringKey: string): void {
    if (this.resets.delete(ringKey)) this.bytes -= ResetMemory.cost(ringKey);
  }

  private static latest(r: Remembered): number {
    return Number.isNaN(r.at) ? r.heard : Number.isNaN(r.heard) ? r.at : Math.max(r.at, r.heard);
  }

  private static cost(ringKey: string): number {
    return stringBytes(ringKey) + ENTRY_BYTES;
  }
}

import { stringBytes } from "./key-bytes.js";

/**
 * How long a reset is remembered: a state of the identifier handed over within this time
 * (a stray state reconciled to its owner, a leaving node's hand-off) was counted before
 * the reset, or at worst just after it, and is dropped rather than merged back.
 */
export const RESET_MEMORY_MS = 60_000;
/** Bound on remembered resets; the oldest are forgotten first. */
const MAX_REMEMBERED_RESETS = 100_000;
/** A Map entry (key, value, chain, bucket) beside its key string. */
const ENTRY_BYTES = 40;

/**
 * The ring keys reset within RESET_MEMORY_MS. Callers choose the identifiers they reset, so
 * it is bounded in bytes as well as entries (100,000 maximal ring keys would be ~150 MB):
 * the state table gives it a share of its byte bound and counts it in its `bytes`. When a
 * reset does not fit, the oldest are forgotten first; a forgotten reset can at worst let a
 * state counted before it be merged back.
 */
export class ResetMemory {
  /** ring key → unix ms until which its reset is remembered; insertion order is expiry order */
  private readonly until = new Map<string, number>();
  bytes = 0;

  constructor(private readonly maxBytes: number) {}

  note(ringKey: string, now: number): void {
    this.forget(ringKey);
    this.drop(now);
    const cost = ResetMemory.cost(ringKey);
    while (this.until.size > 0 && (this.until.size >= MAX_REMEMBERED_RESETS || this.bytes + cost > this.maxBytes)) this.forget(this.until.keys().next().value!);
    this.until.set(ringKey, now + RESET_MEMORY_MS);
    this.bytes += cost;
  }

  has(ringKey: string, now: number): boolean {
    const until = this.until.get(ringKey);
    return until !== undefined && now < until;
  }

  /** Forget the resets remembered long enough. */
  drop(now: number): void {
    for (const [ringKey, until] of this.until) {
      if (until > now) break;
      this.forget(ringKey);
    }
  }

  private forget(ringKey: string): void {
    if (this.until.delete(ringKey)) this.bytes -= ResetMemory.cost(ringKey);
  }

  private static cost(ringKey: string): number {
    return stringBytes(ringKey) + ENTRY_BYTES;
  }
}

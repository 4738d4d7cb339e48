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
  /** ring key → unix ms of its reset, remembered until RESET_MEMORY_MS after it; insertion order is (nearly) expiry order */
  private readonly resets = new Map<string, number>();
  bytes = 0;

  constructor(private readonly maxBytes: number) {}

  /** Remember a reset of `ringKey` made at unix ms `at` (now, or earlier when a peer reports it). */
  note(ringKey: string, at: number, now: number = at): void {
    // A later reset of the same identifier stands for both.
    const known = this.resets.get(ringKey);
    if (known !== undefined && known >= at) return;
    this.forget(ringKey);
    this.drop(now);
    const cost = ResetMemory.cost(ringKey);
    while (this.resets.size > 0 && (this.resets.size >= MAX_REMEMBERED_RESETS || this.bytes + cost > this.maxBytes)) this.forget(this.resets.keys().next().value!);
    this.resets.set(ringKey, at);
    this.bytes += cost;
  }

  /** Unix ms of the remembered reset of `ringKey`, or undefined (never, or over RESET_MEMORY_MS before `now`). */
  at(ringKey: string, now: number): number | undefined {
    const at = this.resets.get(ringKey);
    return at !== undefined && now < at + RESET_MEMORY_MS ? at : undefined;
  }

  /** Forget the resets remembered long enough. */
  drop(now: number): void {
    for (const [ringKey, at] of this.resets) {
      if (at + RESET_MEMORY_MS > now) break;
      this.forget(ringKey);
    }
  }

  private forget(ringKey: string): void {
    if (this.resets.delete(ringKey)) this.bytes -= ResetMemory.cost(ringKey);
  }

  private static cost(ringKey: string): number {
    return stringBytes(ringKey) + ENTRY_BYTES;
  }
}

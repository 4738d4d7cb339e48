/** Bound on remembered blocks; when full the cache starts over (it is only a shortcut). */
const MAX_ENTRIES = 100_000;

interface Block {
  /** unix ms (this node's clock) until which the owner's answer stands */
  until: number;
  limit: number;
  resetTime: number;
}

/**
 * A non-owner's memory of "the owner said this key is blocked until T" (docs/api.md, Cluster behaviour). Until
 * T nothing can unblock the key, unless its limit changes, which is part of the entry; so
 * answering 429 locally until T is exact and spares the owner a round trip per rejected
 * request, the traffic an abusive caller generates most of.
 *
 * T is measured from when the request was received here, which is before the owner
 * decided it: the cached block can only end early, never late.
 */
export class BlockedCache {
  private readonly blocks = new Map<string, Block>();

  get(stateKey: string, limit: number, now: number): Block | undefined {
    const block = this.blocks.get(stateKey);
    if (block === undefined) return undefined;
    if (now < block.until && block.limit === limit) return block;
    this.blocks.delete(stateKey);
    return undefined;
  }

  remember(stateKey: string, limit: number, receivedAt: number, retryAfterMs: number, resetTime: number): void {
    if (this.blocks.size >= MAX_ENTRIES) this.blocks.clear();
    this.blocks.set(stateKey, { until: receivedAt + retryAfterMs, limit, resetTime });
  }

  /** Forget every block (after a reset of limits: a remembered block may no longer stand). */
  clear(): void {
    this.blocks.clear();
  }
}

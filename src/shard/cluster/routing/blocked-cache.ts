import { stringBytes } from "../../table/key-bytes.js";

/**
 * What an entry costs beside its key string: the Map entry (key, value, chain: ~3 words plus
 * its bucket) and the Block object (header and four fields, the numbers possibly boxed).
 */
const ENTRY_OVERHEAD_BYTES = 128;

interface Block {
  /** unix ms (this node's clock) until which the owner's answer stands */
  until: number;
  limit: number;
  resetTime: number;
  /** bytes this entry is counted for */
  cost: number;
}

/**
 * A non-owner's memory of "the owner said this key is blocked until T" (docs/api.md, Cluster behaviour). Until
 * T nothing can unblock the key, unless its limit changes, which is part of the entry; so
 * answering 429 locally until T is exact and spares the owner a round trip per rejected
 * request, the traffic an abusive caller generates most of.
 *
 * T is measured from when the request was received here, which is before the owner
 * decided it: the cached block can only end early, never late.
 *
 * Bounded in bytes, not entries (issue 10: 100,000 maximal keys would be ~700 MB): when a
 * new block does not fit, the oldest ones go first (a Map iterates in insertion order). It
 * is only a shortcut: a forgotten block costs one round trip to the owner, never a count.
 */
export class BlockedCache {
  private readonly blocks = new Map<string, Block>();
  private heldBytes = 0;

  constructor(readonly maxBytes = 16 * 1024 * 1024) {}

  get(stateKey: string, limit: number, now: number): Block | undefined {
    const block = this.blocks.get(stateKey);
    if (block === undefined) return undefined;
    if (now < block.until && block.limit === limit) return block;
    this.forget(stateKey, block);
    return undefined;
  }

  remember(stateKey: string, limit: number, receivedAt: number, retryAfterMs: number, resetTime: number): void {
    const old = this.blocks.get(stateKey);
    if (old !== undefined) this.forget(stateKey, old);
    const cost = stringBytes(stateKey) + ENTRY_OVERHEAD_BYTES;
    if (cost > this.maxBytes) return;
    while (this.heldBytes + cost > this.maxBytes) {
      const [oldestKey, oldest] = this.blocks.entries().next().value as [string, Block];
      this.forget(oldestKey, oldest);
    }
    this.blocks.set(stateKey, { until: receivedAt + retryAfterMs, limit, resetTime, cost });
    this.heldBytes += cost;
  }

  /** Forget every block (after a reset of limits: a remembered block may no longer stand). */
  clear(): void {
    this.blocks.clear();
    this.heldBytes = 0;
  }

  /** bytes held, as counted against maxBytes */
  get bytes(): number {
    return this.heldBytes;
  }

  private forget(stateKey: string, block: Block): void {
    this.blocks.delete(stateKey);
    this.heldBytes -= block.cost;
  }
}

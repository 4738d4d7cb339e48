import { stringBytes } from "../../table/key-bytes.js";
import { ResetMemory, type HeardResets } from "../../table/reset-memory.js";

/**
 * What an entry costs beside its key string: the Map entry (key, value, chain: ~3 words plus
 * its bucket), the Block object (header and five fields, the numbers possibly boxed), and
 * its place in its identifier's group (a Set entry, the Set and its Map entry, shared by the
 * identifier's blocks, and the ring key: a slice of the state key).
 */
const ENTRY_OVERHEAD_BYTES = 240;

interface Block {
  /** unix ms (this node's clock) until which the owner's answer stands */
  until: number;
  limit: number;
  resetTime: number;
  /** bytes this entry is counted for */
  cost: number;
  /** the identifier's ring key: the state key after its first colon (shard/ring/state-key.ts) */
  ringKey: string;
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
  /** ring key → the state keys of its blocks: a reset forgets them without a scan */
  private readonly groups = new Map<string, Set<string>>();
  private heldBytes = 0;

  constructor(
    readonly maxBytes = 16 * 1024 * 1024,
    /** the resets heard of: on a node, its state table's memory (one, counted in MAX_MEMORY_MB); the client keeps its own */
    private readonly resets: HeardResets = new ResetMemory(maxBytes / 16),
  ) {}

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
    const ringKey = stateKey.slice(stateKey.indexOf(":") + 1);
    // Asked before a reset of the identifier was heard of: the owner may have answered before it.
    const notice = this.resets.resetHeardAt(ringKey, receivedAt);
    if (notice !== undefined && receivedAt <= notice) return;
    const cost = stringBytes(stateKey) + ENTRY_OVERHEAD_BYTES;
    if (cost > this.maxBytes) return;
    while (this.heldBytes + cost > this.maxBytes) {
      const [oldestKey, oldest] = this.blocks.entries().next().value as [string, Block];
      this.forget(oldestKey, oldest);
    }
    this.blocks.set(stateKey, { until: receivedAt + retryAfterMs, limit, resetTime, cost, ringKey });
    let group = this.groups.get(ringKey);
    if (group === undefined) this.groups.set(ringKey, (group = new Set()));
    group.add(stateKey);
    this.heldBytes += cost;
  }

  /**
   * The identifier `ringKey` was reset at `now` (its owner says so): forget its blocks, and
   * for a while any block answered to a request received before now (an answer still on its
   * way may predate the reset). Returns how many blocks were forgotten.
   */
  forgetIdentifier(ringKey: string, now: number): number {
    this.resets.hearReset(ringKey, now);
    const group = this.groups.get(ringKey);
    if (group === undefined) return 0;
    const n = group.size;
    for (const stateKey of group) this.forget(stateKey, this.blocks.get(stateKey)!);
    return n;
  }

  /** Forget every block (after a reset of limits: a remembered block may no longer stand). */
  clear(): void {
    this.blocks.clear();
    this.groups.clear();
    this.heldBytes = 0;
  }

  /** bytes held, as counted against maxBytes */
  get bytes(): number {
    return this.heldBytes;
  }

  private forget(stateKey: string, block: Block): void {
    this.blocks.delete(stateKey);
    this.heldBytes -= block.cost;
    const group = this.groups.get(block.ringKey);
    if (group !== undefined && group.delete(stateKey) && group.size === 0) this.groups.delete(block.ringKey);
  }
}

import { randomBytes } from "node:crypto";
import { hash32 } from "../ring/hash.js";
import { type Slab, widened } from "./widen.js";

/**
 * Ring key (namespace + identifier) → the slots of its states, for the state table: a reset
 * finds what it removes in time bounded by that, whatever the table holds. (Looking up every
 * algorithm × every duration the table had seen cost 4 × 4,096 key lookups per reset once
 * callers had used 4,096 durations: 2–12 ms of the owner's CPU, 6–40× a decision;
 * bench/reset.mjs.)
 *
 * Slots whose ring keys hash to one bucket form a doubly linked chain through `next` and
 * `prev` (slot + 1; 0 ends it), so a slot leaves its chain in O(1) when it expires, is
 * evicted or moves. Buckets are at least as many as the table's capacity, so a chain holds
 * the states of one identifier plus about one other; each slot keeps its ring key's hash, so
 * growing relinks without hashing a string. The seed is per process: callers choose the
 * identifiers, and must not be able to build one long chain. 16 bytes per slot of capacity.
 */
export class IdentifierIndex {
  /** bucket → first slot + 1 (0: empty) */
  private heads: Int32Array;
  private mask: number;
  private next: Int32Array;
  private prev: Int32Array;
  /** slot → hash of its ring key */
  private hashes: Uint32Array;
  private readonly seed = randomBytes(4).readUInt32LE(0);

  constructor(capacity: number) {
    const buckets = bucketsFor(capacity);
    this.heads = new Int32Array(buckets);
    this.mask = buckets - 1;
    this.next = new Int32Array(capacity);
    this.prev = new Int32Array(capacity);
    this.hashes = new Uint32Array(capacity);
  }

  /** Per slot of capacity: next, prev, hash, and a bucket (at least one per slot). */
  static readonly SLOT_BYTES = 4 * 4;
  /** Of SLOT_BYTES, the per-slot columns (next, prev, hash): the buckets are an array of their own. */
  static readonly COLUMN_BYTES = 3 * 4;

  /** bytes of the arrays at their capacity */
  get bytes(): number {
    return this.heads.byteLength + this.next.byteLength + this.prev.byteLength + this.hashes.byteLength;
  }

  /** Index `slot`, whose state key is `key` (`${algorithm}${duration}:` + ring key). */
  add(slot: number, key: string): void {
    const h = hash32(key, this.seed, key.indexOf(":") + 1);
    this.hashes[slot] = h;
    this.link(slot, h & this.mask);
  }

  remove(slot: number): void {
    const next = this.next[slot]!;
    const prev = this.prev[slot]!;
    if (prev === 0) this.heads[this.hashes[slot]! & this.mask] = next;
    else this.next[prev - 1] = next;
    if (next !== 0) this.prev[next - 1] = prev;
  }

  /** The slot `from` now lives at `to` (the table compacts by moving its last slot into a hole). */
  move(from: number, to: number): void {
    const next = this.next[from]!;
    const prev = this.prev[from]!;
    this.next[to] = next;
    this.prev[to] = prev;
    this.hashes[to] = this.hashes[from]!;
    if (prev === 0) this.heads[this.hashes[to]! & this.mask] = to + 1;
    else this.next[prev - 1] = to + 1;
    if (next !== 0) this.prev[next - 1] = to + 1;
  }

  /** Room for `capacity` slots, of which the first `count` are in use; the columns from `slab` when given. */
  grow(capacity: number, count: number, slab?: Slab): void {
    this.next = widened(this.next, capacity, slab);
    this.prev = widened(this.prev, capacity, slab);
    this.hashes = widened(this.hashes, capacity, slab);
    const buckets = bucketsFor(capacity);
    if (buckets <= this.heads.length) return;
    this.heads = new Int32Array(buckets);
    this.mask = buckets - 1;
    for (let slot = 0; slot < count; slot++) this.link(slot, this.hashes[slot]! & this.mask);
  }

  /** The slots whose state key `keyOf(slot)` holds the ring key `ringKey`. */
  slotsOf(ringKey: string, keyOf: (slot: number) => string): number[] {
    const h = hash32(ringKey, this.seed);
    const found: number[] = [];
    for (let entry = this.heads[h & this.mask]!; entry !== 0; entry = this.next[entry - 1]!) {
      const slot = entry - 1;
      if (this.hashes[slot] !== h) continue;
      const key = keyOf(slot);
      // The ring key is everything after the state key's first colon (state-key.ts).
      if (key.endsWith(ringKey) && key.indexOf(":") === key.length - ringKey.length - 1) found.push(slot);
    }
    return found;
  }

  private link(slot: number, bucket: number): void {
    const head = this.heads[bucket]!;
    this.next[slot] = head;
    this.prev[slot] = 0;
    if (head !== 0) this.prev[head - 1] = slot + 1;
    this.heads[bucket] = slot + 1;
  }
}

function bucketsFor(capacity: number): number {
  let n = 1;
  while (n < capacity) n *= 2;
  return n;
}

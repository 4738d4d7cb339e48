import { KEY_REF_BYTES, stringBytes } from "./key-bytes.js";
import { type Slab, widened } from "./widen.js";

/** Weight of a state whose counted usage is unknown (handed over without its limit): kept like a full one. */
export const UNKNOWN_WEIGHT = 0xffffffff;

/**
 * Per slot of the state table: its eviction weight, the requests it has counted (limit −
 * remaining at its last allowed decision; a blocked state weighs its whole limit, a fresh one
 * its cost; see eviction.ts); and the bytes of all its keys (string as V8 stores it, plus its
 * reference). A key's bytes are computed again from the key when it goes (a scan of its
 * characters, on removal only) rather than kept: 4 bytes a slot fewer.
 */
export class SlotCosts {
  /** bytes per slot of capacity (weight) */
  static readonly SLOT_BYTES = 4;
  weight: Uint32Array;
  /** bytes of every stored key string and reference */
  keyBytes = 0;

  constructor(capacity: number) {
    this.weight = new Uint32Array(capacity);
  }

  static of(key: string): number {
    return stringBytes(key) + KEY_REF_BYTES;
  }

  /** A new key took `slot`; `cost` is SlotCosts.of(its key). */
  add(slot: number, cost: number): void {
    this.weight[slot] = 0;
    this.keyBytes += cost;
  }

  /** The key `key` leaves the table. */
  remove(key: string): void {
    this.keyBytes -= SlotCosts.of(key);
  }

  move(from: number, to: number): void {
    this.weight[to] = this.weight[from]!;
  }

  grow(capacity: number, slab?: Slab): void {
    this.weight = widened(this.weight, capacity, slab);
  }
}

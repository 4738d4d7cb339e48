import { KEY_REF_BYTES, stringBytes } from "./key-bytes.js";
import { widened } from "./widen.js";

/** Weight of a state whose counted usage is unknown (handed over without its limit): kept like a full one. */
export const UNKNOWN_WEIGHT = 0xffffffff;

/**
 * Per slot of the state table: the bytes its key costs (string as V8 stores it, plus its
 * reference), to give back when it goes, and its eviction weight: the requests it has
 * counted (limit − remaining at its last allowed decision; a blocked state weighs its whole
 * limit, a fresh one its cost). See eviction.ts.
 */
export class SlotCosts {
  cost: Uint32Array;
  weight: Uint32Array;
  /** bytes of every stored key string and reference */
  keyBytes = 0;

  constructor(capacity: number) {
    this.cost = new Uint32Array(capacity);
    this.weight = new Uint32Array(capacity);
  }

  static of(key: string): number {
    return stringBytes(key) + KEY_REF_BYTES;
  }

  add(slot: number, cost: number): void {
    this.cost[slot] = cost;
    this.weight[slot] = 0;
    this.keyBytes += cost;
  }

  remove(slot: number): void {
    this.keyBytes -= this.cost[slot]!;
  }

  move(from: number, to: number): void {
    this.cost[to] = this.cost[from]!;
    this.weight[to] = this.weight[from]!;
  }

  grow(capacity: number): void {
    this.cost = widened(this.cost, capacity);
    this.weight = widened(this.weight, capacity);
  }
}

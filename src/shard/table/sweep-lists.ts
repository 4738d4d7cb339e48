import { type Slab, widened } from "./widen.js";

/**
 * The state table's expiry lists, for a per-second sweep with no timer per key: each slot
 * sits in the list of at most one second, a doubly linked list threaded through two
 * Int32Arrays (prev/next), so a slot that is evicted or deleted leaves its list at once and
 * nothing of it is retained. A slot whose expiry moves later stays where it is; the sweep of
 * its old second re-lists it (see StateTable.sweep), so an update on the hot path costs
 * nothing unless the slot is not listed at all.
 */
export class SweepLists {
  /** the second whose list holds this slot (0: in none) */
  private listed: Uint32Array;
  /** neighbours in that list (-1: none) */
  private prev: Int32Array;
  private next: Int32Array;
  /** second → first slot of its list */
  private readonly heads = new Map<number, number>();
  /** every second up to this one has been swept; nothing is listed under it */
  lastSweptSecond: number;

  constructor(capacity: number, now: number) {
    this.listed = new Uint32Array(capacity);
    this.prev = new Int32Array(capacity);
    this.next = new Int32Array(capacity);
    this.lastSweptSecond = Math.floor(now / 1000);
  }

  /** how many seconds have a list */
  get size(): number {
    return this.heads.size;
  }

  seconds(): number[] {
    return [...this.heads.keys()];
  }

  /** A new key took `slot`: in no list yet. */
  reset(slot: number): void {
    this.listed[slot] = 0;
    this.prev[slot] = -1;
    this.next[slot] = -1;
  }

  /** `slot` now expires at `second`: listed at once only when unlisted or listed later than that. */
  expiresAt(slot: number, second: number): void {
    const listed = this.listed[slot]!;
    if (listed === 0) this.link(slot, second);
    else if (second < listed) {
      this.unlink(slot);
      this.link(slot, second);
    }
  }

  link(slot: number, second: number): void {
    const s = Math.max(second, this.lastSweptSecond + 1);
    const head = this.heads.get(s);
    this.prev[slot] = -1;
    this.next[slot] = head ?? -1;
    if (head !== undefined) this.prev[head] = slot;
    this.heads.set(s, slot);
    this.listed[slot] = s;
  }

  unlink(slot: number): void {
    const second = this.listed[slot]!;
    if (second === 0) return;
    const before = this.prev[slot]!;
    const after = this.next[slot]!;
    if (before !== -1) this.next[before] = after;
    else if (after !== -1) this.heads.set(second, after);
    else this.heads.delete(second);
    if (after !== -1) this.prev[after] = before;
    this.reset(slot);
  }

  /** The slot at `from` moved to `to` (which is unlinked): its neighbours, or its list's head, follow. */
  move(from: number, to: number): void {
    const second = this.listed[from]!;
    const before = this.prev[from]!;
    const after = this.next[from]!;
    this.listed[to] = second;
    this.prev[to] = before;
    this.next[to] = after;
    if (before !== -1) this.next[before] = to;
    else if (second !== 0) this.heads.set(second, to);
    if (after !== -1) this.prev[after] = to;
  }

  /** Detach the whole list of `second` and return its slots, each now in no list. */
  take(second: number): number[] {
    let slot = this.heads.get(second) ?? -1;
    const slots: number[] = [];
    while (slot !== -1) {
      const following = this.next[slot]!;
      slots.push(slot);
      this.reset(slot);
      slot = following;
    }
    this.heads.delete(second);
    return slots;
  }

  /** bytes per slot of capacity: listed, prev, next */
  static readonly SLOT_BYTES = 3 * 4;

  grow(capacity: number, slab?: Slab): void {
    this.listed = widened(this.listed, capacity, slab);
    this.prev = widened(this.prev, capacity, slab);
    this.next = widened(this.next, capacity, slab);
  }

  /** Every one of `count` slots in exactly one list, links consistent: a description of the first problem, or undefined. */
  check(count: number): string | undefined {
    let listed = 0;
    for (const [second, head] of this.heads) {
      if (this.prev[head] !== -1) return `head of ${second} has a prev`;
      for (let slot = head, before = -1; slot !== -1; before = slot, slot = this.next[slot]!) {
        if (slot >= count) return `list ${second} holds a removed slot ${slot}`;
        if (this.listed[slot] !== second) return `slot ${slot} in list ${second} says ${this.listed[slot]}`;
        if (this.prev[slot] !== before) return `slot ${slot} prev is wrong`;
        if (++listed > count) return "a list has a cycle or a slot is listed twice";
      }
    }
    if (listed !== count) return `${listed} listed of ${count} slots`;
    return undefined;
  }
}

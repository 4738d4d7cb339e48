import type { Algorithm, LimitState, Step } from "../../algorithms/types.js";
import { KeyIndex, flatCopy } from "./key-index.js";
import { ChangeLog } from "./change-log.js";
import { OriginSource } from "./origins.js";
import { sampleVictim } from "./eviction.js";
import { MIN_BYTES } from "./key-bytes.js";
import { SlotCosts, UNKNOWN_WEIGHT } from "./slot-costs.js";
import { IdentifierIndex } from "./identifier-index.js";
import { ResetMemory } from "./reset-memory.js";
import { ringKeyOfStateKey } from "../ring/state-key.js";
import { SweepLists } from "./sweep-lists.js";
import { Slab, nextCapacity, widened } from "./widen.js";

export { RESET_MEMORY_MS } from "./reset-memory.js";

/** Bytes per slot of capacity: a, b, c (Float64); expiry, origin, born (32-bit); the sweep lists' and the eviction weight. */
const SLOT_BYTES = 3 * 8 + 3 * 4 + SweepLists.SLOT_BYTES + SlotCosts.SLOT_BYTES;
const INITIAL_CAPACITY = 1024;
/** Of the byte bound, the share remembered resets may use (they are counted in `bytes`). */
const RESET_MEMORY_SHARE = 1 / 16;

export interface StoredState extends LimitState {
  /** unix seconds after which the state is equivalent to no state */
  expiresAt: number;
  /**
   * Which history this state belongs to: a random non-zero u32 drawn when a request
   * creates the state from nothing, kept by every copy of it (replicas, snapshots,
   * hand-off). Two states of one key with the same origin are copies of one history and
   * merge by `mergeCopies` (never counted twice); different origins counted disjoint
   * requests and merge by `merge` (a sum). See docs/durability.md.
   */
  origin: number;
  /**
   * Unix second in which this state's history began on its first count (a fresh origin):
   * kept by every copy, so that a node that remembers a reset of the identifier drops a
   * state begun before the reset and keeps one begun after it (merge-states.ts). Two
   * histories merged keep the later one: what was counted after a reset is never dropped.
   */
  born: number;
}

/** StoredState.origin for a state this node computed itself (a batch): set() keeps the key's origin, or draws one for a new key. */
export const KEEP_ORIGIN = 0;

/** set()'s weight for a state whose counted requests are unchanged or fewer (a refund): the stored key keeps its weight. */
export const KEEP_WEIGHT = -1;

/** Point-in-time copies of a table's columns, for a snapshot written over many event-loop turns. */
export interface TableCopy {
  readonly keys: readonly string[];
  readonly a: Float64Array;
  readonly b: Float64Array;
  readonly c: Float64Array;
  readonly expiry: Uint32Array;
  readonly origin: Uint32Array;
  readonly born: Uint32Array;
}

/**
 * Limit states of the keys this node owns (or, as the replica table, copies of other owners').
 *
 * Memory per key is what bounds a node, so states live in parallel typed arrays indexed by a dense slot number (a
 * removed slot is filled by moving the last one into it), and the only per-key object is the key string, found through
 * an open-addressing index (KeyIndex). A key costs 52 B of arrays (one Slab a growth step) + ~12 of index + ~16 of
 * identifier index (owned table only) + its string (docs/performance.md); bounded in states (MAX_KEYS) and bytes (MAX_MEMORY_MB).
 * Expiry is a per-second sweep over lists of slots by second (SweepLists): no timer per key.
 */
export class StateTable {
  readonly maxKeys: number;
  readonly maxBytes: number;
  evictions = 0;
  expirations = 0;

  private keys: string[] = [];
  private readonly index = new KeyIndex((slot) => this.keys[slot]!);
  private a: Float64Array;
  private b: Float64Array;
  private c: Float64Array;
  /** unix seconds; the state is dropped when a sweep passes this second */
  private expiry: Uint32Array;
  private origin: Uint32Array;
  /** unix second its history began (StoredState.born) */
  private born: Uint32Array;
  private readonly costs: SlotCosts;
  /** SLOT_BYTES, and the change log's per slot once tracked */
  private slotBytes = SLOT_BYTES;
  private readonly origins = new OriginSource();
  private readonly lists: SweepLists;
  private count = 0;

  /**
   * ring key → its states' slots: a reset finds what it removes without a scan. None (and no keysOf) with `resettable: false`,
   * the replica table: 16 B a slot saved, and a replica never resets an identifier (its owner sends a removal per state).
   */
  private readonly identifiers: IdentifierIndex | undefined;
  private changes: ChangeLog | undefined; // see trackChanges
  private slab: Slab | undefined; // the growth step every per-slot column is in (none before the first)
  /** the node's one memory of resets (made here; heard of from owners: the blocked cache, the shares), in `bytes` */
  readonly resets: ResetMemory;

  /** scratch view handed to algorithms, refilled per decision */
  private readonly view: LimitState = { a: 0, b: 0, c: 0 };

  /** `maxBytes`: bound on `bytes` (MAX_MEMORY_MB); states are evicted to stay under it. `resettable`: see `identifiers`. */
  constructor(maxKeys: number, now: number, maxBytes = Infinity, { resettable = true }: { resettable?: boolean } = {}) {
    if (!(maxKeys >= 1 && maxBytes >= MIN_BYTES)) throw new RangeError(`maxKeys must be at least 1 and maxBytes at least ${MIN_BYTES}`);
    this.maxKeys = maxKeys;
    this.maxBytes = maxBytes;
    this.resets = new ResetMemory(maxBytes * RESET_MEMORY_SHARE);
    const capacity = Math.min(INITIAL_CAPACITY, maxKeys);
    this.a = new Float64Array(capacity);
    this.b = new Float64Array(capacity);
    this.c = new Float64Array(capacity);
    this.expiry = new Uint32Array(capacity);
    this.origin = new Uint32Array(capacity);
    this.born = new Uint32Array(capacity);
    this.costs = new SlotCosts(capacity);
    this.lists = new SweepLists(capacity, now);
    this.identifiers = resettable ? new IdentifierIndex(capacity) : undefined;
  }

  get size(): number {
    return this.count;
  }

  /**
   * Bytes held as V8 lays them out: keys, arrays at capacity, the key and identifier indexes,
   * the change log when tracked (replication), remembered resets. bench/table-bytes.mjs: within 1 % of measured.
   */
  get bytes(): number {
    const indexes = this.index.bytes + (this.identifiers?.bytes ?? 0);
    return this.costs.keyBytes + this.a.length * this.slotBytes + indexes + (this.changes?.pendingBytes ?? 0) + this.resets.bytes;
  }

  /** Run one request of weight `cost` for `key` through `algorithm` (`charge`: Algorithm.charge) and store what it counted; answer in `out`. */
  decide(key: string, algorithm: Algorithm, limit: number, durationMs: number, now: number, out: Step, cost = 1, charge = false): void {
    let slot = this.index.get(key);
    let state: LimitState | null = null;
    if (slot !== undefined) {
      const view = this.view;
      view.a = this.a[slot]!;
      view.b = this.b[slot]!;
      view.c = this.c[slot]!;
      state = view;
    }
    if (charge) algorithm.charge(state, limit, durationMs, now, out, cost);
    else algorithm.step(state, limit, durationMs, now, out, cost);
    if (cost === 0 || (charge ? cost < 0 && state === null : !out.allowed)) return;
    if (slot === undefined) {
      slot = this.insert(key);
      this.origin[slot] = this.origins.next();
      this.born[slot] = Math.floor(now / 1000);
    }
    this.write(slot, out.a, out.b, out.c, Math.ceil(out.resetMs / 1000));
    this.costs.weight[slot] = limit - out.remaining;
    this.changes?.note(slot, this.keys[slot]!);
  }

  get(key: string): StoredState | undefined {
    const slot = this.index.get(key);
    if (slot === undefined) return undefined;
    return { a: this.a[slot]!, b: this.b[slot]!, c: this.c[slot]!, expiresAt: this.expiry[slot]!, origin: this.origin[slot]!, born: this.born[slot]! };
  }

  /**
   * Store a state as it is, origin and birth included (hand-off, replicas, snapshots, batches,
   * tests); with KEEP_ORIGIN, a stored key keeps both. `weight`: see SlotCosts; KEEP_WEIGHT
   * keeps a stored key's (a refund), unknown for a new one.
   */
  set(key: string, state: StoredState, weight = UNKNOWN_WEIGHT): void {
    let slot = this.index.get(key);
    if (slot === undefined) {
      slot = this.insert(key);
      this.origin[slot] = state.origin >>> 0 || this.origins.next();
      this.born[slot] = state.born >>> 0;
      this.costs.weight[slot] = UNKNOWN_WEIGHT;
    } else if (state.origin !== KEEP_ORIGIN) {
      this.origin[slot] = state.origin >>> 0;
      this.born[slot] = state.born >>> 0;
    }
    this.write(slot, state.a, state.b, state.c, state.expiresAt);
    if (weight !== KEEP_WEIGHT) this.costs.weight[slot] = weight;
    this.changes?.note(slot, this.keys[slot]!);
  }

  /**
   * From now on, remember each key whose state a decision or a set() changes, once until
   * the next takeChanges() (replication sends a state, not each change). `onFirstChange`
   * runs when the first key is remembered after a take: the caller schedules its flush.
   * Returns the log, whose `pending` counts the keys not yet taken.
   */
  trackChanges(onFirstChange: () => void): ChangeLog {
    this.changes = new ChangeLog(this.a.length, onFirstChange);
    this.slotBytes = SLOT_BYTES + ChangeLog.SLOT_BYTES;
    return this.changes;
  }

  /** The keys changed since the last call (some may have been deleted since). */
  takeChanges(): string[] {
    return this.changes?.take() ?? [];
  }

  delete(key: string): boolean {
    const slot = this.index.get(key);
    if (slot === undefined) return false;
    this.removeSlot(slot);
    return true;
  }

  /**
   * Delete `key` as a change (a reset): trackChanges() lists it, so replication sends its
   * removal and a replica promoted later does not bring it back. delete() is for states
   * that move or lapse (hand-off, merges), whose replicas are left as they are.
   */
  remove(key: string): boolean {
    const slot = this.index.get(key);
    if (slot === undefined) return false;
    this.changes?.note(slot, key);
    this.removeSlot(slot);
    return true;
  }

  /** Remember that the states of `ringKey` were reset at unix ms `at` (`now`, or earlier as a peer reports it; see RESET_MEMORY_MS). */
  noteReset(ringKey: string, at: number, now: number = at): void {
    this.resets.note(ringKey, at, now);
    // Its bytes count with the states': a full table makes room as an insert would.
    while (this.count > 0 && this.bytes > this.maxBytes) this.evictOne();
  }

  /** Unix ms of the reset of `ringKey` remembered at `now` (within RESET_MEMORY_MS), or undefined. */
  resetAt(ringKey: string, now: number): number | undefined {
    return this.resets.at(ringKey, now);
  }

  /** Whether a state of `ringKey` born in unix second `born` was counted before a reset remembered at `now` (born in the reset's own second: no, it may not have been). */
  countedBeforeReset(ringKey: string, born: number, now: number): boolean {
    const at = this.resets.at(ringKey, now);
    return at !== undefined && (born + 1) * 1000 <= at;
  }

  /** The state keys of one identifier (its ring key), found through the identifier index: no scan. */
  keysOf(ringKey: string): string[] {
    if (this.identifiers === undefined) throw new Error("keysOf on a table made with resettable: false");
    return this.identifiers.slotsOf(ringKey, this.keyOf).map(this.keyOf);
  }
  private readonly keyOf = (slot: number): string => this.keys[slot]!;

  /** Visit every stored state (hand-off send path). The visitor must not modify the table. */
  forEach(visit: (key: string, state: StoredState) => void): void {
    const s: StoredState = { a: 0, b: 0, c: 0, expiresAt: 0, origin: 0, born: 0 };
    for (let i = 0; i < this.count; i++) {
      s.a = this.a[i]!;
      s.b = this.b[i]!;
      s.c = this.c[i]!;
      s.expiresAt = this.expiry[i]!;
      s.origin = this.origin[i]!;
      s.born = this.born[i]!;
      visit(this.keys[i]!, s);
    }
  }

  /** Every column as it is now, copied in one synchronous step: a point in time a snapshot encodes over many turns (docs/durability.md). */
  copy(): TableCopy {
    const n = this.count;
    return {
      keys: this.keys.slice(0, n),
      a: this.a.slice(0, n),
      b: this.b.slice(0, n),
      c: this.c.slice(0, n),
      expiry: this.expiry.slice(0, n),
      origin: this.origin.slice(0, n),
      born: this.born.slice(0, n),
    };
  }

  /** Drop every state whose expiry second has passed (once a second, wall clock; tests inject one); how many were dropped. */
  sweep(now: number): number {
    const nowSecond = Math.floor(now / 1000);
    // Expiry at second s means "equivalent to no state from s on": a sweep at s may drop it.
    let dropped = 0;
    const lists = this.lists;
    if (nowSecond - lists.lastSweptSecond > lists.size) {
      // A long gap (start-up, a paused process, a test clock jump): walk the lists instead of the seconds.
      for (const second of lists.seconds()) {
        if (second <= nowSecond) dropped += this.sweepSecond(second, nowSecond);
      }
    } else {
      for (let s = lists.lastSweptSecond + 1; s <= nowSecond; s++) dropped += this.sweepSecond(s, nowSecond);
    }
    lists.lastSweptSecond = Math.max(lists.lastSweptSecond, nowSecond);
    this.resets.drop(now);
    this.expirations += dropped;
    return dropped;
  }

  /** Check the structure (index and keys agree, each slot in exactly one sweep list, links consistent): the first problem, or undefined. O(n), for tests. */
  checkInvariants(): string | undefined {
    if (this.index.size !== this.count) return `index has ${this.index.size} keys for ${this.count} slots`;
    for (let i = 0; i < this.count; i++) if (this.index.get(this.keys[i]!) !== i) return `slot ${i} not indexed`;
    for (let i = 0; i < this.count; i++) if (this.keys.indexOf(this.keys[i]!) !== i) return `key of slot ${i} stored twice`;
    for (let i = 0; i < this.count && this.identifiers !== undefined; i++)
      if (!this.identifiers.slotsOf(ringKeyOfStateKey(this.keys[i]!), this.keyOf).includes(i)) return `slot ${i} not in its identifier's chain`;
    return this.lists.check(this.count);
  }

  private sweepSecond(second: number, nowSecond: number): number {
    // Keys, not slots: removing a slot moves the last slot into its place.
    const due = this.lists.take(second).map((slot) => this.keys[slot]!);
    let dropped = 0;
    for (const key of due) {
      const at = this.index.get(key)!;
      const expiry = this.expiry[at]!;
      if (expiry <= nowSecond) {
        this.removeSlot(at);
        dropped++;
      } else {
        this.lists.link(at, expiry);
      }
    }
    return dropped;
  }

  private write(slot: number, a: number, b: number, c: number, expirySecond: number): void {
    this.a[slot] = a;
    this.b[slot] = b;
    this.c[slot] = c;
    this.expiry[slot] = expirySecond;
    this.lists.expiresAt(slot, expirySecond);
  }

  private insert(key: string): number {
    const cost = SlotCosts.of(key);
    while (this.count > 0 && (this.count >= this.maxKeys || this.bytes + cost > this.maxBytes)) this.evictOne();
    if (this.count === this.a.length && !this.grow(cost)) this.evictOne();
    key = flatCopy(key);
    const slot = this.count++;
    this.keys[slot] = key;
    this.index.add(key, slot);
    this.identifiers?.add(slot, key);
    this.lists.reset(slot);
    this.changes?.reset(slot);
    this.costs.add(slot, cost);
    return slot;
  }

  private evictOne(): void {
    // The state whose loss matters least (eviction.ts).
    this.removeSlot(sampleVictim(this.count, this.expiry, this.costs.weight, this.lists.lastSweptSecond + 1, Math.random));
    this.evictions++;
  }

  private removeSlot(slot: number): void {
    const last = this.count - 1;
    this.lists.unlink(slot);
    this.index.remove(this.keys[slot]!, slot);
    this.identifiers?.remove(slot);
    this.costs.remove(this.keys[slot]!);
    if (slot !== last) {
      const movedKey = this.keys[last]!;
      this.keys[slot] = movedKey;
      this.a[slot] = this.a[last]!;
      this.b[slot] = this.b[last]!;
      this.c[slot] = this.c[last]!;
      this.expiry[slot] = this.expiry[last]!;
      this.origin[slot] = this.origin[last]!;
      this.born[slot] = this.born[last]!;
      this.costs.move(last, slot);
      this.changes?.move(last, slot);
      this.lists.move(last, slot);
      this.index.move(movedKey, last, slot);
      this.identifiers?.move(last, slot);
    }
    this.keys.length = last;
    this.count = last;
  }

  /** Grow by one step (nextCapacity), or less if the byte bound leaves less room; false when not one slot fits. Columns from one Slab, Float64 first. */
  private grow(nextKeyCost: number): boolean {
    const perSlot = this.slotBytes + KeyIndex.SLOT_BYTES + (this.identifiers ? IdentifierIndex.SLOT_BYTES : 0);
    const room = Math.floor((this.maxBytes - this.bytes - nextKeyCost) / perSlot);
    const capacity = Math.min(this.maxKeys, nextCapacity(this.a.length), this.a.length + room);
    if (capacity <= this.a.length) return false;
    const slab = new Slab(capacity, this.slotBytes + KeyIndex.SLOT_BYTES + (this.identifiers ? IdentifierIndex.COLUMN_BYTES : 0));
    this.a = widened(this.a, capacity, slab);
    this.b = widened(this.b, capacity, slab);
    this.c = widened(this.c, capacity, slab);
    this.expiry = widened(this.expiry, capacity, slab);
    this.origin = widened(this.origin, capacity, slab);
    this.born = widened(this.born, capacity, slab);
    this.changes?.grow(capacity, slab);
    this.lists.grow(capacity, slab);
    this.costs.grow(capacity, slab);
    this.index.grow(capacity, slab);
    this.identifiers?.grow(capacity, this.count, slab);
    // every column of the previous step was carried over above (the key index's hashes were its length): none reads it now
    this.slab?.free();
    this.slab = slab;
    return true;
  }
}

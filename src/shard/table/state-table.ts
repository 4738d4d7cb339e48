import type { Algorithm, LimitState, Step } from "../../algorithms/types.js";
import { KeyIndex, flatCopy } from "./key-index.js";
import { ChangeLog } from "./change-log.js";
import { OriginSource } from "./origins.js";
import { parseStateKey } from "./state-key.js";

/** How many random slots an eviction looks at to pick the one closest to expiry (as Redis does). */
const EVICTION_SAMPLES = 5;
const INITIAL_CAPACITY = 1024;
/**
 * How long a reset is remembered: a state of the identifier handed over within this time
 * (a stray state reconciled to its owner, a leaving node's hand-off) was counted before
 * the reset, or at worst just after it, and is dropped rather than merged back.
 */
export const RESET_MEMORY_MS = 60_000;
/** Bound on remembered resets; the oldest are forgotten first. */
const MAX_REMEMBERED_RESETS = 100_000;
/** Distinct durations remembered for resets; past this, a reset of every state of an identifier scans the table. */
const MAX_TRACKED_DURATIONS = 4096;

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
}

/** StoredState.origin for a state this node computed itself (a batch): set() keeps the key's origin, or draws one for a new key. */
export const KEEP_ORIGIN = 0;

/** Point-in-time copies of a table's columns, for a snapshot written over many event-loop turns. */
export interface TableCopy {
  readonly keys: readonly string[];
  readonly a: Float64Array;
  readonly b: Float64Array;
  readonly c: Float64Array;
  readonly expiry: Uint32Array;
  readonly origin: Uint32Array;
}

/**
 * Limit states of the keys this node owns.
 *
 * Memory per key is what bounds a node, so states live in parallel typed arrays indexed
 * by a dense slot number (a removed slot is filled by moving the last one into it), and
 * the only per-key object is the key string, found through an open-addressing index
 * (KeyIndex). A key costs 44 bytes of arrays + ~12 of index + its string.
 *
 * Expiry is a per-second sweep: each slot sits in the list of at most one second, a
 * doubly linked list threaded through two Int32Arrays (prev/next), so a slot that is
 * evicted or deleted leaves its list at once and nothing of it is retained. When a
 * second comes, a slot whose expiry has since moved later is re-listed under its new
 * second instead of being removed. No timer per key, and an update on the hot path
 * costs nothing unless the slot is not listed at all.
 */
export class StateTable {
  readonly maxKeys: number;
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
  private readonly origins = new OriginSource();
  /** the second whose sweep list holds this slot (0: in none) */
  private listed: Uint32Array;
  /** neighbours in that list (-1: none) */
  private prev: Int32Array;
  private next: Int32Array;
  private count = 0;

  /** second → first slot of its list */
  private readonly sweepHeads = new Map<number, number>();
  private lastSweptSecond: number;

  /**
   * Every duration (seconds) a stored state has had, so that removing all the states of
   * one identifier looks up (algorithm × duration) keys instead of scanning. Callers use a
   * handful of durations; undefined once more than MAX_TRACKED_DURATIONS were seen.
   */
  private durationsSeen: Set<number> | undefined = new Set();
  private changes: ChangeLog | undefined; // see trackChanges

  /** ring key → unix ms until which its reset is remembered; insertion order is expiry order */
  private readonly resets = new Map<string, number>();

  /** scratch view handed to algorithms, refilled per decision */
  private readonly view: LimitState = { a: 0, b: 0, c: 0 };

  constructor(maxKeys: number, now: number) {
    if (!(maxKeys >= 1)) throw new RangeError("maxKeys must be at least 1");
    this.maxKeys = maxKeys;
    const capacity = Math.min(INITIAL_CAPACITY, maxKeys);
    this.a = new Float64Array(capacity);
    this.b = new Float64Array(capacity);
    this.c = new Float64Array(capacity);
    this.expiry = new Uint32Array(capacity);
    this.origin = new Uint32Array(capacity);
    this.listed = new Uint32Array(capacity);
    this.prev = new Int32Array(capacity);
    this.next = new Int32Array(capacity);
    this.lastSweptSecond = Math.floor(now / 1000);
  }

  get size(): number {
    return this.count;
  }

  /**
   * Run one request of weight `cost` for `key` through `algorithm` and store the result if
   * it was allowed and counted something (cost 0 is a peek). The answer is in `out`.
   */
  decide(key: string, algorithm: Algorithm, limit: number, durationMs: number, now: number, out: Step, cost = 1): void {
    let slot = this.index.get(key);
    let state: LimitState | null = null;
    if (slot !== undefined) {
      const view = this.view;
      view.a = this.a[slot]!;
      view.b = this.b[slot]!;
      view.c = this.c[slot]!;
      state = view;
    }
    algorithm.step(state, limit, durationMs, now, out, cost);
    if (!out.allowed || cost === 0) return;
    if (slot === undefined) {
      slot = this.insert(key);
      this.noteDuration(durationMs / 1000);
      this.origin[slot] = this.origins.next();
    }
    this.write(slot, out.a, out.b, out.c, Math.ceil(out.resetMs / 1000));
    this.changes?.note(slot, this.keys[slot]!);
  }

  get(key: string): StoredState | undefined {
    const slot = this.index.get(key);
    if (slot === undefined) return undefined;
    return { a: this.a[slot]!, b: this.b[slot]!, c: this.c[slot]!, expiresAt: this.expiry[slot]!, origin: this.origin[slot]! };
  }

  /** Store a state as it is, origin included (hand-off, replicas, snapshots, batches, tests). */
  set(key: string, state: StoredState): void {
    let slot = this.index.get(key);
    if (slot === undefined) {
      slot = this.insert(key);
      this.noteDuration(parseStateKey(key)?.duration);
      this.origin[slot] = state.origin >>> 0 || this.origins.next();
    } else if (state.origin !== KEEP_ORIGIN) this.origin[slot] = state.origin >>> 0;
    this.write(slot, state.a, state.b, state.c, state.expiresAt);
    this.changes?.note(slot, this.keys[slot]!);
  }

  /**
   * From now on, remember each key whose state a decision or a set() changes, once until
   * the next takeChanges() (replication sends a state, not each change). `onFirstChange`
   * runs when the first key is remembered after a take: the caller schedules its flush.
   */
  trackChanges(onFirstChange: () => void): void {
    this.changes = new ChangeLog(this.a.length, onFirstChange);
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

  /** Remember that the states of `ringKey` were reset at `now` (see RESET_MEMORY_MS). */
  noteReset(ringKey: string, now: number): void {
    this.resets.delete(ringKey);
    if (this.resets.size >= MAX_REMEMBERED_RESETS) this.resets.delete(this.resets.keys().next().value!);
    this.resets.set(ringKey, now + RESET_MEMORY_MS);
  }

  /** Whether `ringKey` was reset within RESET_MEMORY_MS of `now`. */
  wasReset(ringKey: string, now: number): boolean {
    const until = this.resets.get(ringKey);
    return until !== undefined && now < until;
  }

  /** The durations (seconds) stored states have had, or undefined when too many to track (then scan with forEach). */
  knownDurations(): ReadonlySet<number> | undefined {
    return this.durationsSeen;
  }

  private noteDuration(duration: number | undefined): void {
    const seen = this.durationsSeen;
    if (seen === undefined || duration === undefined || seen.has(duration)) return;
    if (seen.size >= MAX_TRACKED_DURATIONS) this.durationsSeen = undefined;
    else seen.add(duration);
  }

  /** Visit every stored state (hand-off send path). The visitor must not modify the table. */
  forEach(visit: (key: string, state: StoredState) => void): void {
    const s: StoredState = { a: 0, b: 0, c: 0, expiresAt: 0, origin: 0 };
    for (let i = 0; i < this.count; i++) {
      s.a = this.a[i]!;
      s.b = this.b[i]!;
      s.c = this.c[i]!;
      s.expiresAt = this.expiry[i]!;
      s.origin = this.origin[i]!;
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
    };
  }

  /**
   * Drop every state whose expiry second has passed. Called once a second with the
   * wall clock; tests call it with an injected one. Returns how many were dropped.
   */
  sweep(now: number): number {
    const nowSecond = Math.floor(now / 1000);
    // Expiry at second s means "equivalent to no state from s on": a sweep at s may drop it.
    let dropped = 0;
    if (nowSecond - this.lastSweptSecond > this.sweepHeads.size) {
      // A long gap (start-up, a paused process, a test clock jump): walk the lists instead of the seconds.
      for (const second of [...this.sweepHeads.keys()]) {
        if (second <= nowSecond) dropped += this.sweepSecond(second, nowSecond);
      }
    } else {
      for (let s = this.lastSweptSecond + 1; s <= nowSecond; s++) dropped += this.sweepSecond(s, nowSecond);
    }
    this.lastSweptSecond = Math.max(this.lastSweptSecond, nowSecond);
    for (const [ringKey, until] of this.resets) {
      if (until > now) break;
      this.resets.delete(ringKey);
    }
    this.expirations += dropped;
    return dropped;
  }

  /**
   * Check the structure: index and keys agree, every slot is in exactly one sweep list,
   * links are consistent and nothing else is listed. O(n); for tests and debugging.
   * Returns a description of the first problem, or undefined.
   */
  checkInvariants(): string | undefined {
    if (this.index.size !== this.count) return `index has ${this.index.size} keys for ${this.count} slots`;
    for (let i = 0; i < this.count; i++) if (this.index.get(this.keys[i]!) !== i) return `slot ${i} not indexed`;
    for (let i = 0; i < this.count; i++) if (this.keys.indexOf(this.keys[i]!) !== i) return `key of slot ${i} stored twice`;
    let listed = 0;
    for (const [second, head] of this.sweepHeads) {
      if (this.prev[head] !== -1) return `head of ${second} has a prev`;
      for (let slot = head, before = -1; slot !== -1; before = slot, slot = this.next[slot]!) {
        if (slot >= this.count) return `list ${second} holds a removed slot ${slot}`;
        if (this.listed[slot] !== second) return `slot ${slot} in list ${second} says ${this.listed[slot]}`;
        if (this.prev[slot] !== before) return `slot ${slot} prev is wrong`;
        if (++listed > this.count) return "a list has a cycle or a slot is listed twice";
      }
    }
    if (listed !== this.count) return `${listed} listed of ${this.count} slots`;
    return undefined;
  }

  private sweepSecond(second: number, nowSecond: number): number {
    const head = this.sweepHeads.get(second);
    if (head === undefined) return 0;
    let slot: number = head;
    // Detach the whole list first: removing a slot moves the last slot into its place,
    // which would disturb a walk over indices. Keys stay valid.
    const due: string[] = [];
    while (slot !== -1) {
      const following: number = this.next[slot]!;
      due.push(this.keys[slot]!);
      this.listed[slot] = 0;
      this.prev[slot] = -1;
      this.next[slot] = -1;
      slot = following;
    }
    this.sweepHeads.delete(second);
    let dropped = 0;
    for (const key of due) {
      const at = this.index.get(key)!;
      const expiry = this.expiry[at]!;
      if (expiry <= nowSecond) {
        this.removeSlot(at);
        dropped++;
      } else {
        this.link(at, expiry);
      }
    }
    return dropped;
  }

  private write(slot: number, a: number, b: number, c: number, expirySecond: number): void {
    this.a[slot] = a;
    this.b[slot] = b;
    this.c[slot] = c;
    this.expiry[slot] = expirySecond;
    // Listed under an earlier second: that sweep will re-list it. Only an unlisted slot,
    // or one whose expiry moved earlier than its list, needs listing now.
    const listed = this.listed[slot]!;
    if (listed === 0) this.link(slot, expirySecond);
    else if (expirySecond < listed) {
      this.unlink(slot);
      this.link(slot, expirySecond);
    }
  }

  private link(slot: number, second: number): void {
    const s = Math.max(second, this.lastSweptSecond + 1);
    const head = this.sweepHeads.get(s);
    this.prev[slot] = -1;
    this.next[slot] = head ?? -1;
    if (head !== undefined) this.prev[head] = slot;
    this.sweepHeads.set(s, slot);
    this.listed[slot] = s;
  }

  private unlink(slot: number): void {
    const second = this.listed[slot]!;
    if (second === 0) return;
    const before = this.prev[slot]!;
    const after = this.next[slot]!;
    if (before !== -1) this.next[before] = after;
    else if (after !== -1) this.sweepHeads.set(second, after);
    else this.sweepHeads.delete(second);
    if (after !== -1) this.prev[after] = before;
    this.listed[slot] = 0;
    this.prev[slot] = -1;
    this.next[slot] = -1;
  }

  private insert(key: string): number {
    if (this.count >= this.maxKeys) this.evictOne();
    if (this.count === this.a.length) this.grow();
    key = flatCopy(key);
    const slot = this.count++;
    this.keys[slot] = key;
    this.index.add(key, slot);
    this.listed[slot] = 0;
    this.prev[slot] = -1;
    this.next[slot] = -1;
    this.changes?.reset(slot);
    return slot;
  }

  /** Evict the sampled state closest to expiry: it holds the least that still matters. */
  private evictOne(): void {
    let victim = -1;
    let victimExpiry = Infinity;
    for (let i = 0; i < EVICTION_SAMPLES; i++) {
      const slot = (Math.random() * this.count) | 0;
      if (this.expiry[slot]! < victimExpiry) {
        victim = slot;
        victimExpiry = this.expiry[slot]!;
      }
    }
    this.removeSlot(victim);
    this.evictions++;
  }

  private removeSlot(slot: number): void {
    const last = this.count - 1;
    this.unlink(slot);
    this.index.remove(this.keys[slot]!, slot);
    if (slot !== last) {
      const movedKey = this.keys[last]!;
      this.keys[slot] = movedKey;
      this.a[slot] = this.a[last]!;
      this.b[slot] = this.b[last]!;
      this.c[slot] = this.c[last]!;
      this.expiry[slot] = this.expiry[last]!;
      this.origin[slot] = this.origin[last]!;
      this.changes?.move(last, slot);
      this.listed[slot] = this.listed[last]!;
      const before = this.prev[last]!;
      const after = this.next[last]!;
      this.prev[slot] = before;
      this.next[slot] = after;
      // Neighbours (or the list head) pointed at `last`: point them at its new place.
      if (before !== -1) this.next[before] = slot;
      else if (this.listed[slot] !== 0) this.sweepHeads.set(this.listed[slot]!, slot);
      if (after !== -1) this.prev[after] = slot;
      this.index.move(movedKey, last, slot);
    }
    this.keys.length = last;
    this.count = last;
  }

  private grow(): void {
    const capacity = Math.min(this.maxKeys, this.a.length * 2);
    const widen = <T extends Float64Array | Uint32Array | Int32Array>(old: T, make: (n: number) => T): T => {
      const next = make(capacity);
      next.set(old);
      return next;
    };
    this.a = widen(this.a, (n) => new Float64Array(n));
    this.b = widen(this.b, (n) => new Float64Array(n));
    this.c = widen(this.c, (n) => new Float64Array(n));
    this.expiry = widen(this.expiry, (n) => new Uint32Array(n));
    this.origin = widen(this.origin, (n) => new Uint32Array(n));
    this.changes?.grow(capacity);
    this.listed = widen(this.listed, (n) => new Uint32Array(n));
    this.prev = widen(this.prev, (n) => new Int32Array(n));
    this.next = widen(this.next, (n) => new Int32Array(n));
  }
}

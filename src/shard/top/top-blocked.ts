import { splitRingKey } from "../ring/state-key.js";
import { stringBytes } from "../table/key-bytes.js";

/** How long one sketch collects before it is rotated out: GET /top covers the last one to two of these. */
export const TOP_INTERVAL_MS = 60_000;
/** What one monitored identifier costs besides its key string: its Map entry, its slots in the arrays and the heap. */
const ENTRY_OVERHEAD_BYTES = 96;

/** One (namespace, identifier) and its blocked count, as GET /top answers it. */
export interface TopEntry {
  namespace: string;
  identifier: string;
  /** blocked answers counted (an overestimate by at most `error`) */
  count: number;
  /** how far `count` may overstate the true count (Space-Saving's guarantee) */
  error: number;
}

/**
 * The Space-Saving summary (Metwally, Agrawal, El Abbadi 2005) over one interval: at most
 * `capacity` monitored keys, and bytes within `maxBytes`. A key already monitored counts
 * up; a new key takes the place of the one with the smallest count and inherits that count
 * (+1), which it may overstate by at most that much (`error`). So every key blocked more
 * than N/m times in the interval (N blocked answers, m keys monitored) is in the summary,
 * and each count is at most N/m too high. A min-heap finds the smallest in O(log m).
 */
class SpaceSaving {
  private readonly index = new Map<string, number>();
  private readonly keys: string[] = [];
  private readonly counts: Float64Array;
  private readonly errors: Float64Array;
  /** heap of slots by count; pos[slot] is the slot's place in it */
  private readonly heap: Int32Array;
  private readonly pos: Int32Array;
  private size = 0;
  bytes = 0;
  /** blocked answers counted (N) */
  total = 0;

  constructor(
    private readonly capacity: number,
    private readonly maxBytes: number,
  ) {
    this.counts = new Float64Array(capacity);
    this.errors = new Float64Array(capacity);
    this.heap = new Int32Array(capacity);
    this.pos = new Int32Array(capacity);
  }

  add(key: string): void {
    this.total++;
    const slot = this.index.get(key);
    if (slot !== undefined) {
      this.counts[slot]!++;
      this.down(this.pos[slot]!);
      return;
    }
    const need = stringBytes(key) + ENTRY_OVERHEAD_BYTES;
    if (need > this.maxBytes) return;
    let floor = 0;
    // Full (in entries or bytes): the smallest counts make room, and the newcomer inherits the largest of them.
    while (this.size > 0 && (this.size === this.capacity || this.bytes + need > this.maxBytes)) floor = Math.max(floor, this.removeMin());
    const at = this.size++;
    const s = at; // slots are kept dense: slot = the entry's place in `keys`
    this.keys[s] = key;
    this.counts[s] = floor + 1;
    this.errors[s] = floor;
    this.index.set(key, s);
    this.bytes += need;
    this.heap[at] = s;
    this.pos[s] = at;
    this.up(at);
  }

  /** Every monitored key with its count and error. */
  forEach(visit: (key: string, count: number, error: number) => void): void {
    for (let s = 0; s < this.size; s++) visit(this.keys[s]!, this.counts[s]!, this.errors[s]!);
  }

  /** Drop the key with the smallest count; returns its count. Keeps slots dense by moving the last slot into the freed one. */
  private removeMin(): number {
    const slot = this.heap[0]!;
    const count = this.counts[slot]!;
    const key = this.keys[slot]!;
    this.index.delete(key);
    this.bytes -= stringBytes(key) + ENTRY_OVERHEAD_BYTES;
    // Out of the heap: its last element to the root, sifted down.
    const lastAt = --this.size;
    const moved = this.heap[lastAt]!;
    this.heap[0] = moved;
    this.pos[moved] = 0;
    if (lastAt > 0) this.down(0);
    // Slots dense again: the last slot's entry moves into the freed slot.
    const lastSlot = this.size;
    if (slot !== lastSlot) {
      const k = this.keys[lastSlot]!;
      this.keys[slot] = k;
      this.counts[slot] = this.counts[lastSlot]!;
      this.errors[slot] = this.errors[lastSlot]!;
      this.index.set(k, slot);
      const at = this.pos[lastSlot]!;
      this.heap[at] = slot;
      this.pos[slot] = at;
    }
    this.keys.length = this.size;
    return count;
  }

  private up(at: number): void {
    const { heap, pos, counts } = this;
    const slot = heap[at]!;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (counts[heap[parent]!]! <= counts[slot]!) break;
      heap[at] = heap[parent]!;
      pos[heap[at]!] = at;
      at = parent;
    }
    heap[at] = slot;
    pos[slot] = at;
  }

  private down(at: number): void {
    const { heap, pos, counts } = this;
    const n = this.size;
    const slot = heap[at]!;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= n) break;
      if (child + 1 < n && counts[heap[child + 1]!]! < counts[heap[child]!]!) child++;
      if (counts[heap[child]!]! >= counts[slot]!) break;
      heap[at] = heap[child]!;
      pos[heap[at]!] = at;
      at = child;
    }
    heap[at] = slot;
    pos[slot] = at;
  }
}

/**
 * The identifiers blocked most on this node (docs/api.md, GET /top): two Space-Saving
 * summaries, the current interval's and the previous one's, each with half of `maxBytes`
 * (the top offenders' share of MAX_MEMORY_MB). Every TOP_INTERVAL_MS the previous one is
 * dropped and the current one takes its place, so an answer covers the last one to two
 * intervals. Only blocked answers touch it; the identifier is never a metric label.
 * Rotation is checked on each use, with no timer.
 */
export class TopBlocked {
  private current: SpaceSaving;
  private previous: SpaceSaving;
  private rotateAt: number;
  private readonly capacity: number;

  constructor(
    private readonly maxBytes: number,
    now: number = Date.now(),
    private readonly intervalMs = TOP_INTERVAL_MS,
  ) {
    this.capacity = Math.max(1, Math.floor(maxBytes / 2 / (ENTRY_OVERHEAD_BYTES + 24)));
    this.current = new SpaceSaving(this.capacity, maxBytes / 2);
    this.previous = new SpaceSaving(this.capacity, maxBytes / 2);
    this.rotateAt = now + intervalMs;
  }

  /** bytes held by both summaries' entries */
  get bytes(): number {
    return this.current.bytes + this.previous.bytes;
  }

  /** One blocked answer for (namespace, identifier), at `now` (unix ms). */
  blocked(namespace: string, identifier: string, now: number): void {
    if (now >= this.rotateAt) this.rotate(now);
    // The namespace's length leads, so no namespace and identifier can run into another pair's.
    this.current.add(namespace.length + ":" + namespace + identifier);
  }

  /**
   * The `n` entries blocked most over the last one to two intervals whose namespace `admits`,
   * counts of both summaries added (errors too), largest first.
   */
  top(n: number, admits: (namespace: string) => boolean, now: number = Date.now()): TopEntry[] {
    if (now >= this.rotateAt) this.rotate(now);
    const merged = new Map<string, TopEntry>();
    const visit = (key: string, count: number, error: number) => {
      const found = merged.get(key);
      if (found !== undefined) {
        found.count += count;
        found.error += error;
        return;
      }
      const { namespace, identifier } = splitRingKey(key);
      if (!admits(namespace)) return;
      merged.set(key, { namespace, identifier, count, error });
    };
    this.previous.forEach(visit);
    this.current.forEach(visit);
    return [...merged.values()].sort(byCount).slice(0, n);
  }

  private rotate(now: number): void {
    // Two intervals or more without a blocked answer: both are stale.
    const skipped = now >= this.rotateAt + this.intervalMs;
    this.previous = skipped ? new SpaceSaving(this.capacity, this.maxBytes / 2) : this.current;
    this.current = new SpaceSaving(this.capacity, this.maxBytes / 2);
    this.rotateAt = now + this.intervalMs;
  }
}

/** Largest count first; ties by namespace, then identifier, so every member orders alike. */
export function byCount(a: TopEntry, b: TopEntry): number {
  if (a.count !== b.count) return b.count - a.count;
  if (a.namespace !== b.namespace) return a.namespace < b.namespace ? -1 : 1;
  return a.identifier < b.identifier ? -1 : a.identifier > b.identifier ? 1 : 0;
}

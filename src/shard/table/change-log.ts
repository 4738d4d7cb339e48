import { KEY_REF_BYTES } from "./key-bytes.js";
import { type Slab, widened } from "./widen.js";

/**
 * The keys of a state table whose state changed since the last take(), each once (for
 * replication: a state is sent, not each change). Per slot, the generation in which its key
 * was last logged; a take() starts a new generation. The table tells it when slots move.
 */
export class ChangeLog {
  /** bytes per slot of the table's capacity (loggedIn) */
  static readonly SLOT_BYTES = 4;
  private keys: string[] = [];
  private loggedIn: Uint32Array;
  private generation = 1;

  /** `onFirst` runs when the first key is logged after a take(): the owner schedules its flush. */
  constructor(
    capacity: number,
    private readonly onFirst: () => void,
  ) {
    this.loggedIn = new Uint32Array(capacity);
  }

  note(slot: number, key: string): void {
    if (this.loggedIn[slot] === this.generation) return;
    this.loggedIn[slot] = this.generation;
    if (this.keys.length === 0) this.onFirst();
    this.keys.push(key);
  }

  /** keys logged and not yet taken */
  get pending(): number {
    return this.keys.length;
  }

  /** bytes of the keys logged and not yet taken (references; the strings are the table's) */
  get pendingBytes(): number {
    return this.keys.length * KEY_REF_BYTES;
  }

  take(): string[] {
    const keys = this.keys;
    this.keys = [];
    this.generation = (this.generation + 1) >>> 0 || 1;
    return keys;
  }

  /** A new key took `slot`. */
  reset(slot: number): void {
    this.loggedIn[slot] = 0;
  }

  /** The key at `from` moved to `to`. */
  move(from: number, to: number): void {
    this.loggedIn[to] = this.loggedIn[from]!;
  }

  grow(capacity: number, slab?: Slab): void {
    this.loggedIn = widened(this.loggedIn, capacity, slab);
  }
}

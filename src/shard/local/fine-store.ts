import { concurrency } from "../../algorithms/concurrency.js";
import { acquireFine, emptyFine, FINE_ENTRY_BYTES, fitFine, mergeFine, pruneFine, refines, type FineLapses } from "../../algorithms/fine-lapses.js";
import type { Algorithm, LimitState } from "../../algorithms/index.js";
import { mergeState } from "../records/merge-states.js";
import { fineHere, type FineRecord } from "../records/fine-records.js";
import { parseStateKey } from "../ring/state-key.js";
import type { StateTable, StoredState } from "../table/state-table.js";

const ZERO: LimitState = { a: 0, b: 0, c: 0 };

/** An overlay emptied in place: every slot it knew becomes unknown (held to its bucket's end). */
function clearFine(f: FineLapses): void {
  f.s.length = 0;
  f.m.length = 0;
  f.a = f.b = f.c = 0;
  f.cut = -1;
}

/** Bytes per key beside its entries: the Map entry, the key string's share and the object (~5 fields), rounded up. */
const KEY_BYTES = 160;

/**
 * The owner's side store of fine lapses (algorithms/fine-lapses.ts; the DESIGN at the top of
 * algorithms/concurrency.ts): per concurrency state key, the second each slot it granted
 * lapses in. Bounded in bytes (`maxBytes`, counted in MAX_MEMORY_MB); when full, a slot gets
 * no entry and lapses at its bucket's end, as without the store. Invariant: an overlay is
 * read only while it refines the table's state (checked on every read: a change made
 * elsewhere that freed slots, an eviction, a reset drop it), so the store can only make
 * slots lapse earlier than their bucket's end, never earlier than they really do.
 *
 * Handed over with its states to a member of protocol 15 (mergeWithFine), sent to replicas of
 * protocol 16 with their states (REPLICATE_FINE: a replica keeps them in a FineStore of its
 * own, beside its replica table, read when it is promoted) and written in snapshots (format
 * 4). An heir of 13 or a replica of 15 reads the buckets alone (slots held to their bucket's
 * end, as before) and keeps entries for what it grants.
 */
export class FineStore {
  private readonly overlays = new Map<string, { fine: FineLapses; durationMs: number }>();
  private entries = 0;
  private current: FineLapses = emptyFine();
  /** the holder `use` prepared, until `settle` */
  private held: { fine: FineLapses; durationMs: number } | undefined = undefined;
  private maxEntriesNow = 0;
  /** the lapse second of the lease the last `algorithm` step granted (0: none) */
  leaseS = 0;

  /** concurrency, deciding through the overlay `use` chose; the state table calls it like any algorithm */
  readonly algorithm: Algorithm<"concurrency"> = {
    ...concurrency,
    step: (state, limit, D, now, out, cost = 1) => {
      // The check `use` leaves to the step (useForStep), on the state the table read anyway.
      const f = this.current;
      const same = state !== null && state.a === f.a && state.b === f.b && state.c === f.c;
      if (!same && !refines(state ?? ZERO, f, D, now)) clearFine(f);
      this.leaseS = acquireFine(state, f, limit, D, now, out, cost, this.maxEntriesNow);
    },
  };

  constructor(readonly maxBytes: number) {}

  /** Keys with an overlay: 0 lets a caller skip its lookups (no concurrency key is held). */
  get size(): number {
    return this.overlays.size;
  }

  get bytes(): number {
    return this.overlays.size * KEY_BYTES + this.entries * FINE_ENTRY_BYTES;
  }

  /**
   * The overlay of `key` for a step or a release against `state` (the table's, or null), made
   * current for `algorithm`; a new empty one when it had none or no longer refines `state`.
   * Undefined when the store is full and the key has none: decide on the buckets alone.
   */
  use(key: string, state: Readonly<LimitState> | null, durationMs: number, now: number): FineLapses | undefined {
    const fine = this.useForStep(key, durationMs);
    // The state as the overlay last wrote it (the usual case) needs no check: R held then and time only drops buckets.
    const same = fine !== undefined && state !== null && state.a === fine.a && state.b === fine.b && state.c === fine.c;
    if (fine !== undefined && !same && !refines(state ?? ZERO, fine, durationMs, now)) clearFine(fine);
    return fine;
  }

  /** `use` for `algorithm`'s step, which checks the overlay against the state the table passes it. */
  useForStep(key: string, durationMs: number): FineLapses | undefined {
    let o = this.overlays.get(key);
    if (o === undefined) {
      if (this.bytes + KEY_BYTES > this.maxBytes) return undefined;
      o = { fine: emptyFine(), durationMs };
      this.overlays.set(key, o);
    }
    this.entries -= o.fine.s.length;
    this.held = o;
    this.current = o.fine;
    this.maxEntriesNow = o.fine.s.length + Math.max(0, Math.floor((this.maxBytes - this.bytes) / FINE_ENTRY_BYTES));
    this.leaseS = 0;
    return o.fine;
  }

  /** After the step or release `use` prepared: count the overlay's entries again (an empty one goes). */
  settle(_key: string): void {
    const o = this.held;
    this.held = undefined;
    if (o === undefined) return;
    if (o.fine.s.length === 0 && o.fine.a === 0 && o.fine.b === 0 && o.fine.c === 0) this.overlays.delete(_key);
    else this.entries += o.fine.s.length;
  }

  /** The once-a-second sweep: entries of lapsed buckets go, and overlays left with none. */
  sweep(now: number): void {
    for (const [key, o] of this.overlays) {
      this.entries -= o.fine.s.length;
      pruneFine(o.fine, o.durationMs, now);
      if (o.fine.s.length === 0) this.overlays.delete(key);
      else this.entries += o.fine.s.length;
    }
  }

  /** The overlay of `key` when it refines `state` (a copy, for a hand-off or a merge); undefined when none does. */
  peek(key: string, state: Readonly<LimitState>, now: number): FineLapses | undefined {
    const o = this.overlays.get(key);
    if (o === undefined || o.fine.s.length === 0 || !refines(state, o.fine, o.durationMs, now)) return undefined;
    return { s: o.fine.s.slice(), m: o.fine.m.slice(), a: o.fine.a, b: o.fine.b, c: o.fine.c, cut: -1 };
  }

  /** Copies of every overlay that refines its state in `table` (a snapshot's, taken in the step that copies the table). */
  copyFor(table: StateTable, now: number): { key: string; fine: FineLapses }[] {
    const out: { key: string; fine: FineLapses }[] = [];
    for (const key of this.overlays.keys()) {
      const state = table.get(key);
      const fine = state === undefined ? undefined : this.peek(key, state, now);
      if (fine !== undefined) out.push({ key, fine });
    }
    return out;
  }

  /** Forget `key`'s overlay (its state left this node). */
  drop(key: string): void {
    const o = this.overlays.get(key);
    if (o === undefined) return;
    this.entries -= o.fine.s.length;
    this.overlays.delete(key);
  }

  /**
   * Keep `fine` as `key`'s overlay (it must refine the table's state: fitFine made it so), in
   * place of any. Within `maxBytes`: the latest entries that do not fit go (unknown slots,
   * which keeps R), all of them when the key itself does not.
   */
  install(key: string, fine: FineLapses, durationMs: number): void {
    this.drop(key);
    if (fine.s.length === 0) return;
    const room = Math.floor((this.maxBytes - this.bytes - KEY_BYTES) / FINE_ENTRY_BYTES);
    if (room <= 0) return;
    if (fine.s.length > room) {
      fine.s.length = room;
      fine.m.length = room;
    }
    fine.cut = -1;
    this.overlays.set(key, { fine, durationMs });
    this.entries += fine.s.length;
  }
}

/**
 * mergeState (records/merge-states.ts) of a record that came with its overlay (a hand-off
 * from a member of protocol 15), `fine` already on this clock. The overlay is kept only when
 * the record's state was merged (not one counted before a reset here, which is dropped), and
 * only as fitFine makes it refine the table's state after the merge: merged with this node's
 * own overlay of the key when it held one (mergeFine: copies of one history, or disjoint
 * holders). Invariant R holds for what is kept whatever the sender sent.
 */
export function mergeWithFine(table: StateTable, store: FineStore, key: string, state: StoredState, fine: FineLapses | undefined, now: number): boolean {
  const parsed = parseStateKey(key);
  const plain = fine === undefined || parsed === undefined || parsed.algorithmCode !== concurrency.code;
  if (plain || state.expiresAt * 1000 <= now || table.countedBeforeReset(parsed.ringKey, state.born, now)) return mergeState(table, key, state, now);
  const D = parsed.duration * 1000;
  const had = table.get(key);
  const own = had === undefined ? undefined : store.peek(key, had, now);
  if (!mergeState(table, key, state, now)) return false;
  const after = table.get(key);
  if (after === undefined) return true;
  const incoming = fitFine(state, fine, D, now);
  const combined = had === undefined ? incoming : mergeFine(had, own ?? null, state, incoming, D, now, had.origin === state.origin, { a: 0, b: 0, c: 0 });
  store.install(key, fitFine(after, combined, D, now), D);
  return true;
}

/**
 * A peer's overlays (REPLICATE_FINE) kept for the keys of `keys`, whose states `table` holds as
 * the peer sent them: each fitted to that very state (fitFine: whatever a peer sent, invariant
 * R holds for what is kept, so a forged overlay frees nothing early). One out of bounds for
 * its key's window is ignored: those slots lapse at their buckets' ends.
 */
export function keepPeerOverlays(table: StateTable, store: FineStore, fine: readonly FineRecord[], keys: ReadonlySet<string>, now: number): void {
  for (const f of fine) {
    if (!keys.has(f.key)) continue;
    const state = table.get(f.key);
    const parsed = parseStateKey(f.key);
    if (state === undefined || parsed === undefined) continue;
    const D = parsed.duration * 1000;
    const here = fineHere(f, D, now);
    if (here !== undefined) store.install(f.key, fitFine(state, here, D, now), D);
  }
}

import { bucketMs, bucketsOf, concurrency, heldAt, LIVE_BUCKETS, newestLapseOf, stateOfBuckets } from "./concurrency.js";
import { ceilDiv } from "./integer.js";
import type { LimitState, Step } from "./types.js";

/*
 * The fine overlay of a concurrency state (the DESIGN at the top of concurrency.ts): which
 * second each granted slot really lapses in, beside the five bucket counts that stay the
 * state every other part carries. Pure: the clock arrives as `now`, nothing is kept here.
 *
 * Invariant R, kept by every function that writes an overlay and checked by `refines` before
 * one is used: each entry lies in a live bucket of the state, and per bucket the entries'
 * slots are at most the bucket's count. The slots a bucket counts beyond its entries
 * ("unknown") lapse at the bucket's end. So the held count read through an overlay is never
 * below the true one (a slot is never taken to lapse before it does) and never above the
 * coarse one: an overlay lost or ignored only holds slots longer, never admits more.
 */

/** One key's overlay. Entries sorted by second, distinct, each m ≥ 1. */
export interface FineLapses {
  /** unix seconds at which the entries' slots lapse */
  s: number[];
  /** slots lapsing at each second */
  m: number[];
  /** the coarse state the overlay was last written with: a decrement it did not see makes it unsafe */
  a: number;
  b: number;
  c: number;
  /**
   * Memo of acquireFine (-1: none): entries [0, cut) have their second at or before the last
   * `now` it read, and `cutSlots` is their sum. Appends and increments never touch that prefix
   * (a new slot's second is after now); a release or merge resets it.
   */
  cut?: number;
  cutSlots?: number;
}

/** Bytes an entry costs in a side store (two doubles), for the memory bound. */
export const FINE_ENTRY_BYTES = 16;

export const emptyFine = (): FineLapses => ({ s: [], m: [], a: 0, b: 0, c: 0 });

/** Unix ms at which the bucket holding lapse second `sec` ends. */
const endOf = (sec: number, W: number): number => ceilDiv(sec * 1000, W) * W;

/** Index (0 oldest … 4 newest) of the bucket ending at `end`, or -1 when it is not one of the five. */
function indexOf(newest: number, W: number, end: number): number {
  const j = LIVE_BUCKETS - 1 - (newest - end) / W;
  return Number.isInteger(j) && j >= 0 && j < LIVE_BUCKETS ? j : -1;
}

function remember(fine: FineLapses, state: Readonly<LimitState>): void {
  fine.a = state.a;
  fine.b = state.b;
  fine.c = state.c;
}

/** Entries whose bucket has lapsed at `now` go (their slots are gone with it). */
export function pruneFine(fine: FineLapses, D: number, now: number): void {
  const W = bucketMs(D);
  let k = 0;
  for (let i = 0; i < fine.s.length; i++) {
    if (endOf(fine.s[i]!, W) <= now || fine.m[i]! <= 0) continue;
    fine.s[k] = fine.s[i]!;
    fine.m[k++] = fine.m[i]!;
  }
  fine.s.length = k;
  fine.m.length = k;
  fine.cut = -1;
}

/**
 * Whether `fine` may be read with `state` at `now`: R holds, and no bucket counts fewer slots
 * than when the overlay was last written (a release or reset that did not go through here
 * could have freed one of its entries' slots; more is a merge's additions: unknown slots).
 * Also what an overlay from a peer or a snapshot is checked by before it is kept.
 */
export function refines(state: Readonly<LimitState>, fine: Readonly<FineLapses>, D: number, now: number): boolean {
  const W = bucketMs(D);
  const cur = bucketsOf(state);
  const was = bucketsOf(fine);
  const sums = [0, 0, 0, 0, 0];
  if (fine.s.length !== fine.m.length) return false;
  for (let j = 0; j < LIVE_BUCKETS; j++) {
    const end = was.newest - (LIVE_BUCKETS - 1 - j) * W;
    if (end <= now || was.n[j] === 0) continue;
    const k = indexOf(cur.newest, W, end);
    if (k < 0 || cur.n[k]! < was.n[j]!) return false;
  }
  let prev = -Infinity;
  for (let i = 0; i < fine.s.length; i++) {
    const sec = fine.s[i]!;
    const m = fine.m[i]!;
    if (!Number.isInteger(sec) || !Number.isInteger(m) || m < 1 || sec <= prev) return false;
    prev = sec;
    const end = endOf(sec, W);
    if (end <= now) continue;
    const j = indexOf(cur.newest, W, end);
    if (j < 0) return false;
    sums[j] = sums[j]! + m;
    if (sums[j]! > cur.n[j]!) return false;
  }
  return true;
}

/** Slots counted in live buckets whose own second has come: free, though their bucket still counts them. */
export function lapsedSlots(fine: Readonly<FineLapses>, D: number, now: number): number {
  const W = bucketMs(D);
  let n = 0;
  // Sorted by second: the lapsed entries are a prefix.
  for (let i = 0; i < fine.s.length && fine.s[i]! * 1000 <= now; i++) if (endOf(fine.s[i]!, W) > now) n += fine.m[i]!;
  return n;
}

/**
 * Drop the entries of lapsed buckets, a prefix (sorted by second), and return the slots of the
 * entries left whose second has come (lapsedSlots after the drop), advancing the memo: what
 * one acquisition costs is what time moved since the last, not the entries' number.
 */
function dropAndCountLapsed(fine: FineLapses, W: number, now: number): number {
  let k = 0;
  let dropped = 0;
  while (k < fine.s.length && endOf(fine.s[k]!, W) <= now) dropped += fine.m[k++]!;
  if (k > 0) {
    fine.s.splice(0, k);
    fine.m.splice(0, k);
  }
  let cut = fine.cut ?? -1;
  let sum = fine.cutSlots ?? 0;
  if (cut < k || (cut - k > 0 && fine.s[cut - k - 1]! * 1000 > now)) {
    cut = 0;
    sum = 0;
  } else {
    cut -= k;
    sum -= dropped;
  }
  while (cut < fine.s.length && fine.s[cut]! * 1000 <= now) sum += fine.m[cut++]!;
  fine.cut = cut;
  fine.cutSlots = sum;
  return sum;
}

/**
 * The first moment after `now` at which held slots free, and how many (at least), from the memo
 * dropAndCountLapsed just advanced: entries [0, cut) lapsed in live buckets, so all in the one
 * ending at the first edge after `now`, summing `lapsedInFirst`. The next entry frees first when
 * in that bucket, else its unknown slots at its end (undefined: neither). Usually enough: O(1).
 */
function firstLapse(
  state: Readonly<LimitState>,
  fine: Readonly<FineLapses>,
  W: number,
  now: number,
  lapsedInFirst: number,
): { at: number; slots: number } | undefined {
  const cut = fine.cut ?? -1;
  if (cut < 0) return undefined;
  const endFirst = (Math.floor(now / W) + 1) * W;
  const next = cut < fine.s.length ? fine.s[cut]! * 1000 : Infinity;
  if (next <= endFirst) return { at: next, slots: fine.m[cut]! };
  const b = bucketsOf(state);
  const j = indexOf(b.newest, W, endFirst);
  const unknown = j < 0 ? 0 : b.n[j]! - lapsedInFirst;
  return unknown > 0 ? { at: endFirst, slots: unknown } : undefined;
}

/** Slots held at `now`, read through the overlay (which must refine `state`). */
export function fineHeldAt(state: Readonly<LimitState> | null, fine: Readonly<FineLapses>, D: number, now: number): number {
  return heldAt(state, D, now) - lapsedSlots(fine, D, now);
}

/** One moment at which held slots free: an entry's second, or a bucket's end for its unknown slots. */
interface Lapse {
  at: number;
  slots: number;
  /** index of the entry; -1: the unknown slots of bucket `j` */
  entry: number;
  j: number;
}

/** The held slots in the order they free: per bucket, its live entries by second, then its unknown ones. */
function lapsesOf(state: Readonly<LimitState>, fine: Readonly<FineLapses>, D: number, now: number): Lapse[] {
  const W = bucketMs(D);
  const b = bucketsOf(state);
  const out: Lapse[] = [];
  let i = 0;
  for (let j = 0; j < LIVE_BUCKETS; j++) {
    const end = b.newest - (LIVE_BUCKETS - 1 - j) * W;
    let known = 0;
    for (; i < fine.s.length && endOf(fine.s[i]!, W) <= end; i++) {
      if (endOf(fine.s[i]!, W) !== end) continue;
      known += fine.m[i]!;
      if (fine.s[i]! * 1000 > now) out.push({ at: fine.s[i]! * 1000, slots: fine.m[i]!, entry: i, j });
    }
    if (end > now && b.n[j]! > known) out.push({ at: end, slots: b.n[j]! - known, entry: -1, j });
  }
  return out;
}

/**
 * Decide one acquisition of `cost` slots against `state` read through `fine` (which must refine
 * it): `out` as concurrency.step writes it (reset: the buckets' last lapse, the state's expiry),
 * with retry_after the next lapse that frees enough. Updates `fine` to refine `out`. Returns the lease's lapse second (0 when
 * refused or a peek): its own second, or its bucket's end when no entry could be kept for it
 * (more than `maxEntries`, or a state stamped ahead put it in a later bucket).
 */
export function acquireFine(
  state: Readonly<LimitState> | null,
  fine: FineLapses,
  limit: number,
  D: number,
  now: number,
  out: Step,
  cost: number,
  maxEntries: number,
): number {
  const W = bucketMs(D);
  // Entries never stay at 0 (releases prune them), so only lapsed buckets' entries can go here.
  const freed = dropAndCountLapsed(fine, W, now);
  // The bucket step counts what the buckets hold; of that, `freed` has lapsed already.
  concurrency.step(state, limit + freed, D, now, out, cost);
  const after: LimitState = out.allowed ? out : (state ?? { a: 0, b: 0, c: 0 });
  let leaseS = 0;
  if (out.allowed && cost > 0) {
    const sec = ceilDiv(now + D, 1000);
    const newest = newestLapseOf(out);
    const j = indexOf(newest, W, endOf(sec, W));
    // The step counted the slot in the bucket ending at endOf(sec) (= ⌈(now + D) / W⌉ × W, W being whole
    // seconds), unless a state stamped ahead has no such bucket any more: then in its oldest, later.
    const counted = j >= 0;
    let at = fine.s.length;
    while (at > 0 && fine.s[at - 1]! > sec) at--;
    if (counted && at > 0 && fine.s[at - 1] === sec) {
      fine.m[at - 1] = fine.m[at - 1]! + cost;
      leaseS = sec;
    } else if (counted && fine.s.length < maxEntries) {
      fine.s.splice(at, 0, sec);
      fine.m.splice(at, 0, cost);
      leaseS = sec;
    } else leaseS = Math.max(ceilDiv(now + D, W) * W, newest - (LIVE_BUCKETS - 1) * W) / 1000;
  }
  // resetMs stays the buckets' last lapse: it is the state's expiry, and unknown slots are held to it.
  if (!out.allowed) {
    const held = heldAt(after, D, now) - freed;
    const need = cost === 0 ? 1 : cost;
    const first = firstLapse(after, fine, W, now, freed);
    if (first !== undefined && held - first.slots + need <= limit) out.retryAfterMs = first.at - now;
    else {
      let gone = 0;
      for (const l of lapsesOf(after, fine, D, now)) {
        gone += l.slots;
        if (held - gone + need <= limit) {
          out.retryAfterMs = l.at - now;
          break;
        }
      }
    }
  }
  if (out.allowed) remember(fine, out);
  return leaseS;
}

/** Take `k` slots of lapse `l` from the buckets `n` and from the overlay. */
function take(n: number[], fine: FineLapses, l: Lapse, k: number): void {
  n[l.j] = n[l.j]! - k;
  if (l.entry >= 0) fine.m[l.entry] = fine.m[l.entry]! - k;
}

function store(n: number[], newest: number, fine: FineLapses, D: number, now: number, out: LimitState): void {
  stateOfBuckets(n, newest, out);
  pruneFine(fine, D, now);
  remember(fine, out);
}

/**
 * Free one slot of the lease lapsing at unix second `lapseS` (a release). The lease's own
 * bucket, else the next later one (a state moved across nodes sits up to a bucket later).
 * In that bucket: the lease's own second's entry, else an unknown slot, else its earliest
 * live entry (freeing the slot that lapses first keeps every later one held). Returns whether
 * a slot was freed; writes the state into `out` and updates `fine`.
 */
export function releaseFine(state: Readonly<LimitState>, fine: FineLapses, lapseS: number, D: number, now: number, out: LimitState): boolean {
  const W = bucketMs(D);
  const b = bucketsOf(state);
  const lapses = lapsesOf(state, fine, D, now);
  if (lapseS * 1000 <= now) return false;
  const own = indexOf(b.newest, W, endOf(lapseS, W));
  for (const j of own < 0 ? [] : [own, own + 1]) {
    const here = lapses.filter((l) => l.j === j);
    const pick = here.find((l) => l.entry >= 0 && l.at === lapseS * 1000) ?? here.find((l) => l.entry < 0) ?? here[0];
    if (pick === undefined) continue;
    take(b.n, fine, pick, 1);
    store(b.n, b.newest, fine, D, now, out);
    return true;
  }
  return false;
}

/** Free the `n` held slots that lapse first (RLS give-back, a refund). Returns how many were freed. */
export function releaseOldestFine(state: Readonly<LimitState>, fine: FineLapses, D: number, now: number, out: LimitState, n: number): number {
  const b = bucketsOf(state);
  let freed = 0;
  for (const l of lapsesOf(state, fine, D, now)) {
    if (freed >= n) break;
    const k = Math.min(l.slots, n - freed);
    take(b.n, fine, l, k);
    freed += k;
  }
  store(b.n, b.newest, fine, D, now, out);
  return freed;
}

/**
 * Merge two states and their overlays (null: none, every slot unknown). `copies` (replicas of
 * one history): the buckets take the larger count, and each bucket's entries come from the
 * copy whose count it took, so R holds; else (disjoint holders) counts and entries add. A
 * bucket whose entries would exceed its (clamped) count loses them: unknown, still held.
 */
export function mergeFine(
  x: Readonly<LimitState>,
  fx: Readonly<FineLapses> | null,
  y: Readonly<LimitState>,
  fy: Readonly<FineLapses> | null,
  D: number,
  now: number,
  copies: boolean,
  out: LimitState,
): FineLapses {
  const W = bucketMs(D);
  const bx = bucketsOf(x);
  const by = bucketsOf(y);
  if (copies) concurrency.mergeCopies(x, y, D, now, out);
  else concurrency.merge(x, y, D, now, out);
  const bo = bucketsOf(out);
  const countAt = (b: { n: number[]; newest: number }, end: number): number => {
    const j = indexOf(b.newest, W, end);
    return j < 0 ? 0 : b.n[j]!;
  };
  const knownAt = (f: Readonly<FineLapses> | null, end: number): number => {
    let sum = 0;
    if (f !== null) for (let i = 0; i < f.s.length; i++) if (endOf(f.s[i]!, W) === end) sum += f.m[i]!;
    return sum;
  };
  const bySecond = new Map<number, number>();
  for (let j = 0; j < LIVE_BUCKETS; j++) {
    const end = bo.newest - (LIVE_BUCKETS - 1 - j) * W;
    if (end <= now || bo.n[j] === 0) continue;
    let sources: (Readonly<FineLapses> | null)[];
    if (copies) {
      const cx = countAt(bx, end);
      const cy = countAt(by, end);
      sources = [cx > cy || (cx === cy && knownAt(fx, end) >= knownAt(fy, end)) ? fx : fy];
    } else sources = [fx, fy];
    const part = new Map<number, number>();
    let sum = 0;
    for (const f of sources) {
      if (f === null) continue;
      for (let i = 0; i < f.s.length; i++) {
        if (endOf(f.s[i]!, W) !== end) continue;
        part.set(f.s[i]!, (part.get(f.s[i]!) ?? 0) + f.m[i]!);
        sum += f.m[i]!;
      }
    }
    if (sum <= bo.n[j]!) for (const [sec, m] of part) bySecond.set(sec, m);
  }
  const seconds = [...bySecond.keys()].sort((p, q) => p - q);
  const fine: FineLapses = { s: seconds, m: seconds.map((sec) => bySecond.get(sec)!), a: 0, b: 0, c: 0 };
  remember(fine, out);
  return fine;
}

/**
 * An overlay from elsewhere (a peer's, a snapshot's, a merge) made to refine `state` at `now`:
 * entries whose bucket is not live in it go, and all of a bucket's when they sum to more than
 * it counts: R holds whatever came (dropped slots are unknown). Unsorted seconds empty it.
 */
export function fitFine(state: Readonly<LimitState>, fine: FineLapses, D: number, now: number): FineLapses {
  const W = bucketMs(D);
  const cur = bucketsOf(state);
  const sums = [0, 0, 0, 0, 0];
  const at: number[] = [];
  let prev = -Infinity;
  for (let i = 0; i < fine.s.length; i++) {
    const sec = fine.s[i]!;
    const m = fine.m[i]!;
    if (!Number.isInteger(sec) || !Number.isInteger(m) || m < 1 || sec <= prev) return { ...emptyFine(), a: state.a, b: state.b, c: state.c };
    prev = sec;
    const end = endOf(sec, W);
    const j = end <= now ? -1 : indexOf(cur.newest, W, end);
    at.push(j);
    if (j >= 0) sums[j] = sums[j]! + m;
  }
  const out: FineLapses = { s: [], m: [], a: state.a, b: state.b, c: state.c, cut: -1 };
  for (let i = 0; i < fine.s.length; i++) {
    const j = at[i]!;
    if (j < 0 || sums[j]! > cur.n[j]!) continue;
    out.s.push(fine.s[i]!);
    out.m.push(fine.m[i]!);
  }
  return out;
}

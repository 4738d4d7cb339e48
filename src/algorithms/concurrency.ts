import { settleCharge } from "./charge.js";
import { timesAsTheyAre } from "./ages.js";
import { ceilDiv, floorDiv } from "./integer.js";
import type { AgedBounds, AgedVerdict, Algorithm, LimitState } from "./types.js";

/*
 * At most `limit` requests of a key in flight (docs/api.md, Concurrency). A request that is
 * allowed holds one slot (its `cost` slots) until it is released or its lease lapses.
 *
 * Bounded state: held slots are not kept one by one (a limit of 1,000,000 would be a million
 * timestamps) but counted per lapse bucket. A lease acquired at t lapses at the end of the
 * bucket that holds t + D: L = ⌈(t + D) / W⌉ × W, with W = ⌈D / 4⌉ whole seconds and buckets
 * aligned to the Unix epoch. So a lease is held for at least `duration` and less than
 * `duration` + W (a 60 s lease: 60 to 75 s; a 1 s lease: 1 to 2 s), and at most five buckets
 * are live at once. Five counts of 20 bits and the newest bucket's lapse (unix seconds) fit
 * the three integer numbers every algorithm's state is, so replicas, hand-off, snapshots, the
 * peer wire and the memory bound (56 bytes a key, MAX_MEMORY_MB) carry held slots unchanged.
 *
 * State (all integers, exact in doubles):
 *   a = n0 + n1 × 2^20, b = n2 + n3 × 2^20, c = S × 2^20 + n4,
 * where S is the newest bucket's lapse in unix seconds and n4..n0 count the slots held in the
 * buckets lapsing at S, S − W, …, S − 4W. S < 2^33 (the year 2242) keeps c below 2^53.
 * Counts are at most 2^20 − 1 (the largest limit is 1,000,000): merges clamp to it.
 *
 * Which slot a release frees is the lease's bucket (its lapse time, which the lease carries);
 * the bucket lapses as a whole, so the count can never go below what is still held there.
 */

/*
 * DESIGN (#41 item 4: lapse within 1 s of `duration`). Built: the overlay and its operations
 * (fine-lapses.ts), kept by the owner in a side store (shard/local/fine-store.ts), handed over
 * with its states to a member of protocol 15 (CALL MERGE_FINE), to replicas of protocol 16
 * (CALL REPLICATE_FINE, kept beside the replica table and promoted with it) and snapshotted
 * (format 4): shard/records/fine-records.ts. As built, the wire entry is
 * an f64 of ms from the send, placed on the receiver's nearest second (not the u32 rounded up
 * sketched below: that added a whole second per hop), and fitted (fitFine) rather than
 * refused whole when it breaks R. The coarse state above
 * stays, unchanged, as the one every part of the system already carries; beside it an owner
 * keeps a FINE overlay that says, of the slots a coarse bucket counts, which second each one
 * really lapses in. The coarse state is then a conservative projection of the fine one.
 *
 * Fine overlay of one key: a sparse list of (lapse second s, count m), sorted by s, of the
 * slots taken with a lapse of ⌈(t + D) / 1 s⌉ (the lease's own second, not its bucket's end).
 * Every s lies in one coarse bucket: k(s) = the bucket lapsing at ⌈s / W⌉ × W.
 *
 * Invariant R (what makes the overlay safe to lose or ignore): for every live bucket k,
 *   fine_k = Σ m over the entries with k(s) = k   ≤   coarse_k.
 * The coarse_k − fine_k slots without an entry ("unknown") are taken to lapse at the bucket's
 * end, the latest any of them can: never earlier than they really do.
 *   held(now) = Σ over live k of (coarse_k − Σ m over the entries of k with s ≤ now).
 * Since every entry's s ≤ its bucket's end, held(now) ≥ the true count and ≤ the coarse held:
 * dropping the overlay (memory full, an old peer, a reader that does not know it) can only
 * hold slots longer (up to D + W, today's bound), never admit more.
 *
 * Operations, each keeping R (coarse and fine are written in the same synchronous step):
 * - acquire at t: coarse as today (bucket ⌈(t + D) / W⌉ × W), and m += cost at s = ⌈t + D⌉ s.
 *   The decision uses held(now): the coarse step runs with limit + (fine slots of live
 *   buckets already lapsed), which admits exactly when held(now) + cost ≤ limit.
 * - the lease carries s (its second) instead of the bucket's end; a release maps s to k(s)
 *   (old leases carry a bucket end L, and k(L) = L) and takes one from coarse_k and, when the
 *   entry (s) has any, from it too. Whichever of the interchangeable slots of second s it was,
 *   the rest are still counted to lapse no earlier than they do.
 * - releaseOldest (RLS give-back): per bucket, oldest first, the live entries by s, then the
 *   unknown ones; each taken from both.
 * - retry_after: the earliest time at which held + need ≤ limit, walking the live entries and
 *   the buckets' ends (unknown slots) in time order: the next slot's own second, within 1 s.
 * - merge of disjoint holders (hand-off): coarse add, fine add per second.
 * - mergeCopies (replicas, promotion): coarse takes per bucket the larger count; the fine
 *   entries of that bucket come from the same copy (on a tie, the copy with more fine slots
 *   there), so R holds for the result; never a max per second (that can exceed coarse_k).
 * - anything else that changes the coarse state (a merge that knows no overlay, eviction and
 *   a fresh state, an operator reset): the overlay remembers the coarse counts it was last
 *   written with; on use, if some coarse_k is now smaller than remembered, the overlay is
 *   dropped (coarse rules, still safe); larger is a merge's additions: unknown slots.
 *
 * Where it lives and travels:
 * - Memory: a side store per concurrency state key on the owner (and replicas), bounded in
 *   bytes, its own share of MAX_MEMORY_MB beside the released leases' (8 bytes an entry in a
 *   typed array plus the key); at most min(held, D + 1) entries a key. When the store is full
 *   a slot gets no entry: it is unknown, lapsing at its bucket's end.
 * - Peer wire, feature 15 (FEATURE_VERSIONS.FINE_LAPSES), gated per link: a state record of a
 *   concurrency key is followed by u32 entry count, then entries of (u32 seconds until s,
 *   rounded up; u32 m), both checked before anything is allocated (count ≤ D + 1 and ≤ the
 *   coarse held, each s within the record's live buckets, R against the record's own coarse
 *   counts) or the overlay is dropped and the coarse state kept. A link of 14 or below gets
 *   the three numbers only, today's record byte for byte.
 * - Snapshots, format version 4: the same entries after each concurrency record, as absolute
 *   unix seconds (same clock); a version 3 file still loads (no overlay: coarse rules).
 * - Clock: a lapse carried as seconds-until, rounded up, lands at most 1 s later per hop,
 *   never earlier; through a snapshot it is exact.
 *
 * Bounds this gives: a lease held at least `duration` and at most `duration` + 1 s on its
 * owner (+ up to 1 s per peer hop, + W where the overlay was lost); never over-admitted.
 */

/** Buckets per lease lifetime: a lease lapses at most D/4 (rounded up to whole seconds) after its `duration`. */
export const BUCKETS_PER_DURATION = 4;
/** Live buckets at once: a lease acquired now and the four before it may still be held. */
const LIVE = BUCKETS_PER_DURATION + 1;
const BASE = 2 ** 20;
/** The most slots one bucket counts (clamp of merged states). */
export const MAX_BUCKET_COUNT = BASE - 1;

/** The bucket width W for a lease lifetime of `D` ms: whole seconds, at least D / 4. */
export function bucketMs(D: number): number {
  return ceilDiv(D, BUCKETS_PER_DURATION * 1000) * 1000;
}

/** Unix ms at which a lease acquired at `now` lapses: the end of the bucket holding now + D. */
export function lapseOf(now: number, D: number): number {
  const W = bucketMs(D);
  return ceilDiv(now + D, W) * W;
}

/** A decoded state: counts oldest first, and the newest bucket's lapse (ms). Scratch, reused. */
interface Buckets {
  n: number[];
  newest: number;
}

const x0: Buckets = { n: [0, 0, 0, 0, 0], newest: 0 };
const y0: Buckets = { n: [0, 0, 0, 0, 0], newest: 0 };

function decode(state: Readonly<LimitState> | null, into: Buckets): Buckets {
  const n = into.n;
  if (state === null) {
    n.fill(0);
    into.newest = 0;
    return into;
  }
  const hiA = Math.floor(state.a / BASE);
  const hiB = Math.floor(state.b / BASE);
  const s = Math.floor(state.c / BASE);
  n[0] = state.a - hiA * BASE;
  n[1] = hiA;
  n[2] = state.b - hiB * BASE;
  n[3] = hiB;
  n[4] = state.c - s * BASE;
  into.newest = s * 1000;
  return into;
}

function encode(b: Buckets, out: LimitState): void {
  const n = b.n;
  out.a = n[0]! + n[1]! * BASE;
  out.b = n[2]! + n[3]! * BASE;
  out.c = (b.newest / 1000) * BASE + n[4]!;
}

/** The bucket counts of `state`, oldest first, and the newest bucket's lapse (ms): fresh arrays, for fine-lapses.ts. */
export function bucketsOf(state: Readonly<LimitState> | null): { n: number[]; newest: number } {
  const b = decode(state, { n: [0, 0, 0, 0, 0], newest: 0 });
  return { n: b.n, newest: b.newest };
}

/** The newest bucket's lapse (ms) of `state`, without decoding the counts. */
export function newestLapseOf(state: Readonly<LimitState>): number {
  return Math.floor(state.c / BASE) * 1000;
}

/** Write bucket counts (oldest first) and the newest lapse (ms) as a state. */
export function stateOfBuckets(n: readonly number[], newest: number, out: LimitState): void {
  encode({ n: n as number[], newest }, out);
}

/** Live buckets at once (five): fine-lapses.ts walks them. */
export const LIVE_BUCKETS = LIVE;

/** Move `b` so its newest bucket lapses at `newest` (≥ b.newest, both multiples of W): older buckets fall off. */
function alignTo(b: Buckets, newest: number, W: number): void {
  const shift = Math.min(LIVE, (newest - b.newest) / W);
  const n = b.n;
  if (shift > 0) {
    for (let j = 0; j < LIVE; j++) n[j] = j + shift < LIVE ? n[j + shift]! : 0;
  }
  b.newest = newest;
}

/** Zero the buckets that have lapsed at `now` (a lease lapsing at L is free from L on). */
function dropLapsed(b: Buckets, W: number, now: number): void {
  for (let j = 0; j < LIVE; j++) if (b.newest - (LIVE - 1 - j) * W <= now) b.n[j] = 0;
}

function held(b: Buckets): number {
  let sum = 0;
  for (let j = 0; j < LIVE; j++) sum += b.n[j]!;
  return sum;
}

/** Lapse (ms) of the newest bucket that holds anything; `now` when none does. */
function lastLapse(b: Buckets, W: number, now: number): number {
  for (let j = LIVE - 1; j >= 0; j--) if (b.n[j]! > 0) return b.newest - (LIVE - 1 - j) * W;
  return now;
}

/**
 * The live bucket a lease lapsing at `lapse` is counted in: the nearest one (a lease minted on a
 * member whose clock is a second off), else the next one later (a state moved across nodes sits
 * up to one bucket later); -1 when none holds a slot.
 */
function bucketOf(b: Buckets, lapse: number, W: number): number {
  const j = LIVE - 1 - floorDiv(b.newest - lapse + W / 2, W);
  if (j >= 0 && j < LIVE && b.n[j]! > 0) return j;
  if (j + 1 >= 0 && j + 1 < LIVE && b.n[j + 1]! > 0) return j + 1;
  return -1;
}

/**
 * Free `cost` slots of the lease lapsing at unix ms `lapse` (a release, or a refund of what a
 * reservation counted). Writes the state into `out` (which may alias `state`) and returns
 * whether anything was freed: nothing when the lease has lapsed (`lapse` ≤ now) or its bucket
 * holds nothing. The caller keeps a lease from being released twice (shard/local/leases.ts).
 */
export function releaseLease(state: Readonly<LimitState>, cost: number, lapse: number, D: number, now: number, out: LimitState): boolean {
  const W = bucketMs(D);
  const b = decode(state, x0);
  dropLapsed(b, W, now);
  const j = lapse > now ? bucketOf(b, lapse, W) : -1;
  if (j >= 0) b.n[j] = Math.max(0, b.n[j]! - cost);
  encode(b, out);
  return j >= 0;
}

/**
 * Free `n` slots of the oldest held leases, those that would lapse first (RLS: Envoy's release
 * names no lease). Writes the state into `out` and returns how many were freed (fewer when
 * fewer are held).
 */
export function releaseOldest(state: Readonly<LimitState>, D: number, now: number, out: LimitState, n = 1): number {
  const W = bucketMs(D);
  const b = decode(state, x0);
  dropLapsed(b, W, now);
  let freed = 0;
  for (let j = 0; j < LIVE && freed < n; j++) {
    const take = Math.min(b.n[j]!, n - freed);
    b.n[j] = b.n[j]! - take;
    freed += take;
  }
  encode(b, out);
  return freed;
}

/** Slots held at `now`. */
export function heldAt(state: Readonly<LimitState> | null, D: number, now: number): number {
  const b = decode(state, x0);
  dropLapsed(b, bucketMs(D), now);
  return held(b);
}

function combine(x: Readonly<LimitState>, y: Readonly<LimitState>, D: number, now: number, f: (p: number, q: number) => number, out: LimitState): void {
  const W = bucketMs(D);
  const bx = decode(x, x0);
  const by = decode(y, y0);
  const newest = Math.max(bx.newest, by.newest);
  alignTo(bx, newest, W);
  alignTo(by, newest, W);
  for (let j = 0; j < LIVE; j++) bx.n[j] = Math.min(MAX_BUCKET_COUNT, f(bx.n[j]!, by.n[j]!));
  dropLapsed(bx, W, now);
  encode(bx, out);
}

const add = (p: number, q: number): number => p + q;

export const concurrency: Algorithm<"concurrency"> = {
  name: "concurrency",
  code: 4,

  step(state, limit, D, now, out, cost = 1) {
    const W = bucketMs(D);
    const b = decode(state, x0);
    const target = ceilDiv(now + D, W) * W;
    // A state stamped ahead of this clock (it stepped back, or a peer's) keeps its newest bucket.
    if (target > b.newest) alignTo(b, target, W);
    dropLapsed(b, W, now);
    const inUse = held(b);
    const need = cost === 0 ? 1 : cost;
    if (inUse + need <= limit) {
      // Counted in the bucket lapsing at `target`, or the oldest live one if that is later still.
      const j = Math.max(0, LIVE - 1 - (b.newest - target) / W);
      b.n[j] = b.n[j]! + cost;
      out.allowed = true;
      out.remaining = limit - inUse - cost;
      out.retryAfterMs = 0;
      out.resetMs = lastLapse(b, W, now);
      encode(b, out);
      return;
    }
    out.allowed = false;
    // Like every algorithm's 429: nothing more is allowed now (a cost above the free slots is blocked whole).
    out.remaining = 0;
    out.resetMs = lastLapse(b, W, now);
    // The earliest lapse after which `need` slots are free (cost ≤ limit: the last one frees all).
    let freed = 0;
    out.retryAfterMs = out.resetMs - now;
    for (let j = 0; j < LIVE; j++) {
      freed += b.n[j]!;
      if (b.n[j]! > 0 && inUse - freed + need <= limit) {
        out.retryAfterMs = b.newest - (LIVE - 1 - j) * W - now;
        break;
      }
    }
  },

  // A concurrency key holds slots, never debt (the RLS door plans no charge of it: descriptor-item.ts);
  // a charge that reaches one anyway holds `cost` slots whatever is free, and a refund frees the oldest.
  charge(state, limit, D, now, out, cost) {
    if (cost < 0) {
      if (state === null) encode(decode(null, x0), out);
      else releaseOldest(state, D, now, out, -cost);
    } else {
      const W = bucketMs(D);
      const b = decode(state, x0);
      const target = ceilDiv(now + D, W) * W;
      if (target > b.newest) alignTo(b, target, W);
      dropLapsed(b, W, now);
      const j = Math.max(0, LIVE - 1 - (b.newest - target) / W);
      b.n[j] = Math.min(MAX_BUCKET_COUNT, b.n[j]! + cost);
      encode(b, out);
    }
    const used = heldAt(out, D, now);
    settleCharge(concurrency, limit, D, now, out, used <= limit, used);
  },

  merge(x, y, D, now, out) {
    // Disjoint holders: the slots of each bucket add up.
    combine(x, y, D, now, add, out);
  },

  mergeCopies(x, y, D, now, out) {
    // Copies of one history: each bucket keeps the larger count (a release the other copy has not seen stays held until it lapses).
    combine(x, y, D, now, Math.max, out);
  },

  refund(state, cost, countedAt, D, now, out) {
    releaseLease(state, cost, lapseOf(countedAt, D), D, now, out);
  },

  expiresAt(state, _limit, D) {
    const W = bucketMs(D);
    return lastLapse(decode(state, x0), W, 0);
  },

  leaving: timesAsTheyAre,

  toAges(state, now, out) {
    // The newest lapse's age in whole seconds, rounded up (negative: still ahead); counts as they are.
    const s = Math.floor(state.c / BASE);
    const n4 = state.c - s * BASE;
    out.a = state.a;
    out.b = state.b;
    out.c = ceilDiv(now - s * 1000, 1000) * BASE + n4;
  },

  fromAges(aged, D, now, out) {
    // Back on this clock: the age, rounded up, puts the lapse up to a second early (and the
    // transfer's time late). Buckets of 2 s or more take the nearest edge, which on clocks in
    // step is the lapse itself (through a snapshot, always); a skew of s moves it to the edge
    // nearest lapse + s. Buckets of 1 s take the edge above: at most 1 s later, never earlier.
    const W = bucketMs(D);
    const ageS = Math.floor(aged.c / BASE);
    const n4 = aged.c - ageS * BASE;
    const lapse = ceilDiv(now - ageS * 1000 - (W >= 2000 ? W / 2 : 0), W) * W;
    out.a = aged.a;
    out.b = aged.b;
    out.c = (lapse / 1000) * BASE + n4;
  },

  checkAged(aged: LimitState, D: number, bounds: AgedBounds): AgedVerdict {
    if (aged.a < 0 || aged.b < 0 || aged.a >= BASE * BASE || aged.b >= BASE * BASE) return "invalid";
    const ageS = Math.floor(aged.c / BASE);
    // The newest lapse is at most D + W ahead (plus the sender's clock tolerance).
    if (-ageS * 1000 > D + bucketMs(D) + bounds.ageToleranceMs + 1000) return "invalid";
    if (ageS >= 0) return "expired";
    const b = decode(aged, y0);
    for (let j = 0; j < LIVE; j++) b.n[j] = Math.min(b.n[j]!, bounds.maxLimit);
    const n = b.n;
    aged.a = n[0]! + n[1]! * BASE;
    aged.b = n[2]! + n[3]! * BASE;
    aged.c = ageS * BASE + n[4]!;
    return "ok";
  },
};

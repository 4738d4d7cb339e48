/**
 * The fine lapses' records (shard/records/fine-records.ts) and what a receiver keeps of them
 * (fitFine): bounds checked before allocating, a round trip over the peer form, and an overlay
 * that would break invariant R (a forged or misplaced one) cut until it refines the state.
 */
import t from "tap";
import { concurrency, heldAt } from "../../../src/algorithms/concurrency.js";
import { acquireFine, emptyFine, fineHeldAt, fitFine, refines, type FineLapses } from "../../../src/algorithms/fine-lapses.js";
import { newStep, type LimitState } from "../../../src/algorithms/index.js";
import {
  decodeFineRecords,
  decodeReplicatedWithFine,
  decodeStatesWithFine,
  encodeReplicatedWithFine,
  encodeStatesWithFine,
  fineHere,
  fineRecordBytes,
  MAX_FINE_ENTRIES_PER_KEY,
  writeFineRecord,
} from "../../../src/shard/records/fine-records.js";
import { stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { encodeStates } from "../../../src/shard/records/state-records.js";

const T0 = 1_800_000_000_000;
const D = 8_000;
const key = stateKeyOf(concurrency.code, D / 1000, "4:testk");

function held(n: number, at: (i: number) => number): { state: LimitState; fine: FineLapses } {
  let state: LimitState = { a: 0, b: 0, c: 0 };
  const fine = emptyFine();
  for (let i = 0; i < n; i++) {
    const out = newStep();
    acquireFine(state, fine, 100, D, at(i), out, 1, 1000);
    state = { a: out.a, b: out.b, c: out.c };
  }
  return { state, fine };
}

t.test("peer form: every entry back on its second across a quick transfer, R against the state", async (t) => {
  const { state, fine } = held(5, (i) => T0 + i * 900);
  const payload = encodeStatesWithFine(
    [{ key, state: { ...state, expiresAt: Math.ceil((T0 + 20_000) / 1000), origin: 7, born: T0 / 1000 } }],
    [{ key, fine }],
    T0 + 4_000,
  );
  const { records, fine: got } = decodeStatesWithFine(payload);
  t.equal(records.length, 1);
  t.equal(got.length, 1);
  const here = fineHere(got[0]!, D, T0 + 4_040)!;
  t.same(here.s, fine.s, "a 40 ms transfer lands each entry on its own second");
  t.same(here.m, fine.m);
  const kept = fitFine(state, here, D, T0 + 4_040);
  t.ok(refines(state, kept, D, T0 + 4_040));
  t.same(kept.s, fine.s, "all kept: they refine the state");
});

t.test("replication form (REPLICATE_FINE): REPLICATE's records as they were, the overlays after; a payload that cannot be split refused whole", async (t) => {
  const { state, fine } = held(3, (i) => T0 + i * 1_100);
  const records = encodeStates([{ key, state: { ...state, expiresAt: Math.ceil((T0 + 20_000) / 1000), origin: 7, born: T0 / 1000 } }], T0 + 3_000);
  const payload = encodeReplicatedWithFine(records, [{ key, fine }], T0 + 3_000);
  const got = decodeReplicatedWithFine(payload);
  t.ok(got.records.equals(records), "the records byte for byte as REPLICATE carries them");
  t.equal(got.fine.length, 1);
  t.same(fineHere(got.fine[0]!, D, T0 + 3_020)!.s, fine.s, "each entry back on its second");
  t.same(decodeReplicatedWithFine(encodeReplicatedWithFine(records, [], T0)).fine, [], "no overlay: the records alone");
  t.throws(() => decodeReplicatedWithFine(Buffer.alloc(3)), RangeError, "shorter than its length field");
  const long = Buffer.from(payload);
  long.writeUInt32BE(payload.length, 0);
  t.throws(() => decodeReplicatedWithFine(long), RangeError, "a length beyond the payload");
  t.throws(() => decodeReplicatedWithFine(payload.subarray(0, payload.length - 5)), RangeError, "a truncated overlay");
});

t.test("bounds: checked before anything is allocated; out-of-order, zero or non-integer entries refused", async (t) => {
  const big = Buffer.alloc(2 + key.length + 2);
  big.writeUInt16BE(key.length, 0);
  big.write(key, 2);
  big.writeUInt16BE(MAX_FINE_ENTRIES_PER_KEY + 1, 2 + key.length);
  t.throws(() => decodeFineRecords(big, 0, big.length), RangeError, "more entries than a key may carry: refused on the count alone");
  big.writeUInt16BE(3, 2 + key.length);
  t.throws(() => decodeFineRecords(big, 0, big.length), RangeError, "entries the bytes do not hold: refused");
  const one = (lapse: number[], m: number[]): Buffer => {
    const f: FineLapses = { s: lapse, m, a: 0, b: 0, c: 0 };
    const buf = Buffer.alloc(fineRecordBytes(key, lapse.length));
    writeFineRecord(buf, 0, key, f, undefined);
    return buf;
  };
  const bad = [one([5, 4], [1, 1]), one([5, 5], [1, 1]), one([5], [0]), one([5.5], [1]), one([NaN], [1]), one([1e15], [1])];
  for (const b of bad) t.throws(() => decodeFineRecords(b, 0, b.length), RangeError);
  t.equal(decodeFineRecords(one([4, 5], [1, 2]), 0, fineRecordBytes(key, 2)).length, 1, "a sound one decodes");
  t.equal(fineHere({ key, lapse: [D + 5_000], m: [1] }, D, T0), undefined, "further ahead than a lease of the window can be: ignored");
});

t.test("fitFine: what would free slots early is dropped, so a forged overlay never admits more", async (t) => {
  const { state, fine } = held(3, (i) => T0 + i * 300);
  const now = T0 + 1_000;
  t.equal(heldAt(state, D, now), 3);
  // Forged: more slots than the bucket counts, all lapsing at once soon.
  const forged: FineLapses = { s: [fine.s[0]!], m: [50], a: 0, b: 0, c: 0 };
  const kept = fitFine(state, forged, D, now);
  t.same(kept.s, [], "a bucket's entries summing beyond its count all go");
  t.ok(refines(state, kept, D, now));
  for (const at of [fine.s[0]! * 1000 - 500, fine.s[0]! * 1000, fine.s[2]! * 1000]) {
    t.equal(fineHeldAt(state, kept, D, at), heldAt(state, D, at), "every slot held to its bucket's end, as with no overlay");
  }
  // An entry outside any live bucket of the state (misplaced by a skew, or made up): dropped alone.
  const misplaced: FineLapses = { s: [...fine.s, fine.s[0]! + 60], m: [...fine.m, 1], a: 0, b: 0, c: 0 };
  const kept2 = fitFine(state, misplaced, D, now);
  t.same(kept2.s, fine.s);
  t.ok(refines(state, kept2, D, now));
});

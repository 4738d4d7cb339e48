import { isUtf8 } from "node:buffer";
import { MAX_BUCKET_COUNT } from "../../algorithms/concurrency.js";
import type { FineLapses } from "../../algorithms/fine-lapses.js";
import { REQUEST_BOUNDS } from "../../decision.js";
import { decodeStates, MAX_KEY_BYTES, type AgedRecord, type StateRecord, encodeStates } from "./state-records.js";

/*
 * The fine lapses of concurrency states (algorithms/fine-lapses.ts) as they travel with the
 * states' records: on a hand-off (CALL MERGE_FINE, peer-protocol feature FINE_LAPSES) and in
 * snapshot files of format 4. Nothing here is believed: a receiver fits what it decodes to
 * the state it holds (fitFine), which drops whatever would break invariant R, so a wrong or
 * forged overlay can only make slots lapse at their buckets' ends, as with none.
 *
 * Overlay record: u16 key length, key (UTF-8), u16 entry count n, then n entries of
 * f64 lapse and u32 slots. The lapse is, on the peer channel, the ms from the send to the
 * entry's second (negative: passed; the receiver takes the nearest second: fineHere), and in
 * a snapshot the unix second itself
 * (read back on the clock that wrote it).
 */

/** Most entries one key's overlay carries: a sender cuts the latest beyond it (they become unknown slots). */
export const MAX_FINE_ENTRIES_PER_KEY = 4096;
const ENTRY_BYTES = 12;
const MAX_DURATION_MS = REQUEST_BOUNDS.duration.max * 1000;

/** One key's overlay as decoded: lapses as the record carries them (see above), not yet on any clock. */
export interface FineRecord {
  key: string;
  lapse: number[];
  m: number[];
}

export function fineRecordBytes(key: string, entries: number): number {
  return 2 + Buffer.byteLength(key) + 2 + Math.min(entries, MAX_FINE_ENTRIES_PER_KEY) * ENTRY_BYTES;
}

/** Write `fine`'s entries for `key` at `o` (room made by the caller: fineRecordBytes); `now` undefined: unix seconds (a snapshot). */
export function writeFineRecord(buf: Buffer, o: number, key: string, fine: Readonly<FineLapses>, now: number | undefined): number {
  const n = Math.min(fine.s.length, MAX_FINE_ENTRIES_PER_KEY);
  const k = buf.write(key, o + 2, "utf8");
  buf.writeUInt16BE(k, o);
  o += 2 + k;
  o = buf.writeUInt16BE(n, o);
  for (let i = 0; i < n; i++) {
    o = buf.writeDoubleBE(now === undefined ? fine.s[i]! : fine.s[i]! * 1000 - now, o);
    o = buf.writeUInt32BE(fine.m[i]!, o);
  }
  return o;
}

/**
 * Decode the overlay records in buf[start, end). Throws RangeError when they cannot be split
 * into records or an entry is out of bounds (not an integer, slots 0 or above a bucket's
 * most, lapses not strictly increasing or beyond any window): the count and the bytes it
 * needs are checked before anything is allocated for a record.
 */
export function decodeFineRecords(buf: Buffer, start: number, end: number): FineRecord[] {
  const out: FineRecord[] = [];
  let o = start;
  while (o < end) {
    if (o + 2 > end) throw new RangeError("truncated overlay record");
    const k = buf.readUInt16BE(o);
    if (k > MAX_KEY_BYTES || o + 2 + k + 2 > end) throw new RangeError("truncated overlay record");
    const raw = buf.subarray(o + 2, o + 2 + k);
    const key = isUtf8(raw) ? raw.toString("utf8") : "";
    o += 2 + k;
    const n = buf.readUInt16BE(o);
    o += 2;
    if (n > MAX_FINE_ENTRIES_PER_KEY || o + n * ENTRY_BYTES > end) throw new RangeError("overlay record out of bounds");
    const lapse = new Array<number>(n);
    const m = new Array<number>(n);
    for (let i = 0; i < n; i++, o += ENTRY_BYTES) {
      const l = buf.readDoubleBE(o);
      const slots = buf.readUInt32BE(o + 8);
      if (!Number.isInteger(l) || Math.abs(l) > 2 * MAX_DURATION_MS || slots < 1 || slots > MAX_BUCKET_COUNT || (i > 0 && l <= lapse[i - 1]!)) {
        throw new RangeError("overlay entry out of bounds");
      }
      lapse[i] = l;
      m[i] = slots;
    }
    out.push({ key, lapse, m });
  }
  return out;
}

/**
 * A peer's overlay (ms from its send) on this clock `now`: each second the nearest to where the
 * ms land, as concurrency's fromAges puts a bucket's edge. The entry was a whole second on the
 * sender, so a transfer under half a second (clocks in step) lands it on that very second:
 * rounding up would add a whole second for a millisecond's transfer. A skew moves it by the
 * skew, as it moves the buckets. Undefined when an entry lies further ahead than a lease of `D`
 * can (D and a second, and the clock tolerance): out of bounds, the overlay is ignored.
 */
export function fineHere(r: FineRecord, D: number, now: number): FineLapses | undefined {
  const s: number[] = [];
  for (let i = 0; i < r.lapse.length; i++) {
    if (r.lapse[i]! > D + 2000) return undefined;
    const sec = Math.round((now + r.lapse[i]!) / 1000);
    // Two entries less than a second apart on the wire cannot both be whole seconds: refused.
    if (s.length > 0 && sec <= s[s.length - 1]!) return undefined;
    s.push(sec);
  }
  return { s, m: r.m.slice(), a: 0, b: 0, c: 0, cut: -1 };
}

/** A hand-off batch with overlays (MERGE_FINE): the states' records as MERGE_STATES carries them, their overlays after. */
export interface StatesWithFine {
  records: AgedRecord[];
  fine: FineRecord[];
}

/** MERGE_FINE's payload: u32 length of the state records, the records (ages at `now`), then the overlay records. */
export function encodeStatesWithFine(records: readonly StateRecord[], fine: readonly { key: string; fine: Readonly<FineLapses> }[], now: number): Buffer {
  return encodeReplicatedWithFine(encodeStates(records, now), fine, now);
}

/** Decode MERGE_FINE's payload; throws RangeError on one that cannot be split (nothing of it is applied then). */
export function decodeStatesWithFine(payload: Buffer): StatesWithFine {
  const { records, fine } = decodeReplicatedWithFine(payload);
  return { records: decodeStates(records), fine };
}

/** A batch with overlays (REPLICATE_FINE, and MERGE_FINE before its records are split): the records as they came, their overlays decoded. */
export interface ReplicatedWithFine {
  records: Buffer;
  fine: FineRecord[];
}

/**
 * REPLICATE_FINE's payload: u32 length of the state records, REPLICATE's records (ages at the
 * send, already in `records`), then the overlay records (ms from `now`, the send) of those
 * concurrency states whose owner kept one.
 */
export function encodeReplicatedWithFine(records: Buffer, fine: readonly { key: string; fine: Readonly<FineLapses> }[], now: number): Buffer {
  let size = 4 + records.length;
  for (const f of fine) size += fineRecordBytes(f.key, f.fine.s.length);
  const buf = Buffer.allocUnsafe(size);
  buf.writeUInt32BE(records.length, 0);
  records.copy(buf, 4);
  let o = 4 + records.length;
  for (const f of fine) o = writeFineRecord(buf, o, f.key, f.fine, now);
  return buf.subarray(0, o);
}

/**
 * Decode REPLICATE_FINE's payload; throws RangeError on one that cannot be split (nothing of it
 * is applied then). The records are read as REPLICATE's are, one by one (forEachAgedRecord).
 */
export function decodeReplicatedWithFine(payload: Buffer): ReplicatedWithFine {
  if (payload.length < 4) throw new RangeError("truncated batch with overlays");
  const L = payload.readUInt32BE(0);
  if (4 + L > payload.length) throw new RangeError("truncated batch with overlays");
  return { records: payload.subarray(4, 4 + L), fine: decodeFineRecords(payload, 4 + L, payload.length) };
}

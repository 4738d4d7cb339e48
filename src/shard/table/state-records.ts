import { isUtf8 } from "node:buffer";
import type { StoredState } from "./state-table.js";

/**
 * The binary form of stored states, shared by the hand-off and replication calls on the
 * peer channel and by snapshot files, so a state means the same thing wherever it goes.
 *
 * Record: u16 key length (UTF-8 bytes), key, f64 a, f64 b, f64 c, u32 expiresAt (unix s), u32 origin.
 * A record with origin 0 and expiresAt 0 is a removal (REMOVED): no state has origin 0, and
 * a receiver that does not know removals drops it as an expired state.
 */
export interface StateRecord {
  key: string;
  state: StoredState;
}

/** The record of a state removed by a reset (see above): replicas drop their copy. */
export const REMOVED: Readonly<StoredState> = Object.freeze({ a: 0, b: 0, c: 0, expiresAt: 0, origin: 0 });

export function isRemoval(state: StoredState): boolean {
  return state.origin === 0 && state.expiresAt === 0;
}

const RECORD_FIXED_BYTES = 2 + 8 + 8 + 8 + 4 + 4;
const STATE_BYTES = RECORD_FIXED_BYTES - 2;
/** State keys are built from bounded fields (namespace ≤ 256 + product, identifier ≤ 512): far below this. */
export const MAX_KEY_BYTES = 8 * 1024;

export function recordBytes(key: string): number {
  return RECORD_FIXED_BYTES + Buffer.byteLength(key);
}

/** An upper bound of recordBytes(key) without measuring the UTF-8 length (3 bytes per UTF-16 unit at most). */
export function maxRecordBytes(key: string): number {
  return RECORD_FIXED_BYTES + key.length * 3;
}

/** Write one record at `o` (the caller made room: maxRecordBytes); returns the offset after it. */
export function writeRecord(buf: Buffer, o: number, key: string, a: number, b: number, c: number, expiresAt: number, origin: number): number {
  const n = buf.write(key, o + 2, "utf8");
  buf.writeUInt16BE(n, o);
  o += 2 + n;
  o = buf.writeDoubleBE(a, o);
  o = buf.writeDoubleBE(b, o);
  o = buf.writeDoubleBE(c, o);
  o = buf.writeUInt32BE(expiresAt >>> 0, o);
  return buf.writeUInt32BE(origin >>> 0, o);
}

/** The length of the record at `o` from its key length alone (it may run past the buffer: the decoder checks). */
export function recordLengthAt(buf: Buffer, o: number): number {
  return 2 + buf.readUInt16BE(o) + STATE_BYTES;
}

export function encodeStates(records: readonly StateRecord[]): Buffer {
  let size = 0;
  for (const r of records) size += recordBytes(r.key);
  const buf = Buffer.allocUnsafe(size);
  let o = 0;
  for (const { key, state } of records) o = writeRecord(buf, o, key, state.a, state.b, state.c, state.expiresAt, state.origin);
  return buf;
}

/**
 * Decode the records in buf[start, end), calling `visit` for each. Throws RangeError when
 * they cannot be split into records. Values are not judged here: records from peers are
 * checked one by one (cluster/peer-data.ts checkState), a snapshot by its checksum, and
 * mergeState skips keys it cannot parse.
 */
export function forEachRecord(buf: Buffer, start: number, end: number, visit: (key: string, state: StoredState) => void): void {
  let o = start;
  while (o < end) {
    if (o + 2 > end) throw new RangeError("truncated state record");
    const n = buf.readUInt16BE(o);
    if (n > MAX_KEY_BYTES || o + 2 + n + STATE_BYTES > end) throw new RangeError("truncated state record");
    let key = buf.toString("utf8", o + 2, o + 2 + n);
    // Lossy decoding would give two byte strings one key: what is not UTF-8 becomes "", an invalid key.
    if (key.includes("\ufffd") && !isUtf8(buf.subarray(o + 2, o + 2 + n))) key = "";
    o += 2 + n;
    const state: StoredState = {
      a: buf.readDoubleBE(o),
      b: buf.readDoubleBE(o + 8),
      c: buf.readDoubleBE(o + 16),
      expiresAt: buf.readUInt32BE(o + 24),
      origin: buf.readUInt32BE(o + 28),
    };
    o += STATE_BYTES;
    visit(key, state);
  }
}

/** Throws RangeError on a batch that cannot be split into records: nothing of it is applied then. */
export function decodeStates(buf: Buffer): StateRecord[] {
  const records: StateRecord[] = [];
  forEachRecord(buf, 0, buf.length, (key, state) => records.push({ key, state }));
  return records;
}

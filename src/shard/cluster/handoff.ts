import { isUtf8 } from "node:buffer";
import { algorithmByCode, type LimitState } from "../../algorithms/index.js";
import { parseStateKey } from "../table/state-key.js";
import type { StateTable, StoredState } from "../table/state-table.js";

/** Peer-channel CALL methods of the cold path. */
export const CallMethod = Object.freeze({
  /** payload: the leaving member's ring name (UTF-8). Receivers drop it from their ring at once. */
  LEAVE: 1,
  /** payload: state records; receivers merge each into their table. Reply: u32 records merged. */
  MERGE_STATES: 2,
  /** empty: the sender has handed the receiver every state that moved to it when the sender added it to its ring. */
  HANDOFF_DONE: 3,
  /** payload: the sender's client-facing URL (UTF-8, may be empty). Reply: the receiver's (docs/client.md). */
  ADVERTISE: 4,
});

/** A batch is cut at this size (plus one record), within the peer channel's 512 KiB frame limit. */
export const MAX_BATCH_BYTES = 256 * 1024;
const RECORD_FIXED_BYTES = 2 + 8 + 8 + 8 + 4;

export interface StateRecord {
  key: string;
  state: StoredState;
}

/** Records: u16 key length (UTF-8 bytes), key, f64 a, f64 b, f64 c, u32 expiresAt (unix s). */
export function encodeStates(records: readonly StateRecord[]): Buffer {
  let size = 0;
  for (const r of records) size += RECORD_FIXED_BYTES + Buffer.byteLength(r.key);
  const buf = Buffer.allocUnsafe(size);
  let o = 0;
  for (const { key, state } of records) {
    const n = buf.write(key, o + 2, "utf8");
    buf.writeUInt16BE(n, o);
    o += 2 + n;
    o = buf.writeDoubleBE(state.a, o);
    o = buf.writeDoubleBE(state.b, o);
    o = buf.writeDoubleBE(state.c, o);
    o = buf.writeUInt32BE(state.expiresAt, o);
  }
  return buf;
}

export function recordBytes(key: string): number {
  return RECORD_FIXED_BYTES + Buffer.byteLength(key);
}

/**
 * The records of a batch. Throws RangeError when the batch cannot be split into records
 * (nothing of it is applied then). A record's values are not judged here: see checkState
 * (peer-data.ts), which refuses records one by one. A key that is not UTF-8 decodes to "".
 */
export function decodeStates(buf: Buffer): StateRecord[] {
  const records: StateRecord[] = [];
  let o = 0;
  while (o < buf.length) {
    if (o + 2 > buf.length) throw new RangeError("truncated state record");
    const n = buf.readUInt16BE(o);
    if (o + 2 + n + 28 > buf.length) throw new RangeError("truncated state record");
    let key = buf.toString("utf8", o + 2, o + 2 + n);
    // Lossy decoding would give two byte strings one key: refuse what is not UTF-8.
    if (key.includes("\ufffd") && !isUtf8(buf.subarray(o + 2, o + 2 + n))) key = "";
    o += 2 + n;
    const state = { a: buf.readDoubleBE(o), b: buf.readDoubleBE(o + 8), c: buf.readDoubleBE(o + 16), expiresAt: buf.readUInt32BE(o + 24) };
    o += 28;
    records.push({ key, state });
  }
  return records;
}

/**
 * Merge handed-over states into `table`. The sender deleted each state as it sent it, so
 * the two sides counted disjoint requests and the algorithm's merge (a sum of what both
 * consumed) neither forgets nor double-counts anything.
 */
export function mergeStates(table: StateTable, records: readonly StateRecord[], now: number): number {
  const merged: LimitState = { a: 0, b: 0, c: 0 };
  let count = 0;
  for (const { key, state } of records) {
    const parsed = parseStateKey(key);
    const algorithm = parsed && algorithmByCode(parsed.algorithmCode);
    if (parsed === undefined || algorithm === undefined) continue;
    const existing = table.get(key);
    if (existing === undefined) {
      table.set(key, state);
    } else {
      const D = parsed.duration * 1000;
      algorithm.merge(existing, state, D, now, merged);
      // Buckets keep their limit in `c`; the windows ignore the limit argument.
      const expiresAt = Math.max(existing.expiresAt, state.expiresAt, Math.ceil(algorithm.expiresAt(merged, merged.c || 1, D) / 1000));
      table.set(key, { a: merged.a, b: merged.b, c: merged.c, expiresAt });
    }
    count++;
  }
  return count;
}

import { isUtf8 } from "node:buffer";
import { algorithmByCode, type LimitState } from "../../algorithms/index.js";
import type { StoredState } from "../table/state-table.js";

/**
 * The binary form of stored states, shared by the hand-off and replication calls on the
 * peer channel and by snapshot files, so a state means the same thing wherever it goes.
 *
 * Record: u16 key length (UTF-8 bytes), key, f64 a, f64 b, f64 c, u32 expiry, u32 origin,
 * u32 born (StoredState.born: the second the state's history began).
 * Its times are read in one of two ways (docs/peer-protocol.md, "States on the wire"):
 *
 * - Snapshots (writeRecord, forEachRecord): as the table holds them, on this node's clock;
 *   the expiry and birth are unix seconds. A snapshot is read back by the node that wrote it, on the
 *   same clock.
 * - The peer channel (encodeStates or agesInPlace, decodeStates): each time as its age at
 *   the send (Algorithm.toAges), the expiry as whole seconds after the send, rounded up (0:
 *   expired), the birth as whole seconds before the send (the sender's second minus the
 *   state's: the receiver's second minus that is never earlier, so a state is never made
 *   older than it is, which could drop it as counted before a reset). Another node's clock may be minutes off; an age means the same on both. The
 *   receiver checks the ages (cluster/peer-data.ts) and puts them on its clock (rebaseState).
 *
 * A record with origin 0 and expiry 0 is a removal (removalRecord): no state has origin 0,
 * and a receiver that does not know removals drops it as an expired state. Its birth is the
 * second of the reset that removed the state.
 */
export interface StateRecord {
  key: string;
  state: StoredState;
}

/** A state as the peer channel carries it (see above): times as ages at the send. */
export interface AgedState extends LimitState {
  /** whole seconds after the send at which the state is equivalent to none (0: already) */
  expiresInS: number;
  origin: number;
  /** whole seconds before the send at which the state's history began (a removal: its reset) */
  bornAgoS: number;
}

export interface AgedRecord {
  key: string;
  state: AgedState;
}

/** The record of a state removed by the reset made at unix ms `resetAt` (see above): replicas drop their copy and remember the reset. */
export function removalRecord(resetAt: number): StoredState {
  return { a: 0, b: 0, c: 0, expiresAt: 0, origin: 0, born: Math.floor(resetAt / 1000) };
}

/** Whether a record from a peer is a removal (removalRecord, which the conversion to ages keeps one). */
export function isRemoval(state: AgedState): boolean {
  return state.origin === 0 && state.expiresInS === 0;
}

const RECORD_FIXED_BYTES = 2 + 8 + 8 + 8 + 4 + 4 + 4;
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
export function writeRecord(buf: Buffer, o: number, key: string, a: number, b: number, c: number, expiresAt: number, origin: number, born: number): number {
  const n = buf.write(key, o + 2, "utf8");
  buf.writeUInt16BE(n, o);
  o += 2 + n;
  o = buf.writeDoubleBE(a, o);
  o = buf.writeDoubleBE(b, o);
  o = buf.writeDoubleBE(c, o);
  o = buf.writeUInt32BE(expiresAt >>> 0, o);
  o = buf.writeUInt32BE(origin >>> 0, o);
  return buf.writeUInt32BE(born >>> 0, o);
}

/** The length of the record at `o` from its key length alone (it may run past the buffer: the decoder checks). */
export function recordLengthAt(buf: Buffer, o: number): number {
  return 2 + buf.readUInt16BE(o) + STATE_BYTES;
}

/** This node's states (its clock), in the peer channel's form as of `now`: ages (see above). */
export function encodeStates(records: readonly StateRecord[], now: number): Buffer {
  let size = 0;
  for (const r of records) size += recordBytes(r.key);
  const buf = Buffer.allocUnsafe(size);
  let o = 0;
  for (const { key, state } of records) o = writeRecord(buf, o, key, state.a, state.b, state.c, state.expiresAt, state.origin, state.born);
  agesInPlace(buf, 0, o, now);
  return buf;
}

const scratch: LimitState = { a: 0, b: 0, c: 0 };

/**
 * Turn the records in buf[start, end), written by writeRecord from this node's table, into
 * the peer channel's form as of `now`, in place: a batch filled over several turns is
 * converted once, when it is sent, so every age is measured at the send. Each state is
 * first put as it may leave this node (Algorithm.leaving: no window start after the send).
 */
export function agesInPlace(buf: Buffer, start: number, end: number, now: number): void {
  convertInPlace(buf, start, end, now, true);
}

/**
 * The records in buf[start, end), written by writeRecord from this node's table, as they
 * may leave it at `now` for a snapshot file (Algorithm.leaving), in place: absolute times,
 * none after `now` that nothing but a carry put there, so a snapshot read back is checked as
 * strictly as a peer's state (state-check.ts admitSnapshotState).
 */
export function leavingInPlace(buf: Buffer, start: number, end: number, now: number): void {
  convertInPlace(buf, start, end, now, false);
}

function convertInPlace(buf: Buffer, start: number, end: number, now: number, toAges: boolean): void {
  const nowS = now / 1000;
  const second = Math.floor(nowS);
  let o = start;
  while (o < end) {
    const n = buf.readUInt16BE(o);
    // A state key starts with its algorithm's code as one digit (state-key.ts).
    const algorithm = n > 0 ? algorithmByCode(buf[o + 2]! - 48) : undefined;
    o += 2 + n;
    if (algorithm !== undefined) {
      scratch.a = buf.readDoubleBE(o);
      scratch.b = buf.readDoubleBE(o + 8);
      scratch.c = buf.readDoubleBE(o + 16);
      // Put earlier: the expiry comes back as far, in whole seconds (never before the state's own).
      const earlierS = Math.floor(algorithm.leaving(scratch, now, scratch) / 1000);
      if (earlierS > 0) buf.writeUInt32BE(Math.max(0, buf.readUInt32BE(o + 24) - earlierS), o + 24);
      if (toAges) algorithm.toAges(scratch, now, scratch);
      buf.writeDoubleBE(scratch.a, o);
      buf.writeDoubleBE(scratch.b, o + 8);
      buf.writeDoubleBE(scratch.c, o + 16);
    }
    if (toAges) {
      buf.writeUInt32BE(Math.max(0, Math.ceil(buf.readUInt32BE(o + 24) - nowS)), o + 24);
      buf.writeUInt32BE(Math.max(0, second - buf.readUInt32BE(o + 32)), o + 32);
    }
    o += STATE_BYTES;
  }
}

/**
 * A peer's state (ages, checked: cluster/peer-data.ts) on this node's clock `now`. The
 * expiry is the later of the sender's, carried over, and the algorithm's for the state as
 * placed here: a window put into this node's current window lasts at least to its end.
 */
export function rebaseState(algorithmCode: number, durationMs: number, aged: AgedState, now: number): StoredState {
  const algorithm = algorithmByCode(algorithmCode)!;
  const state: StoredState = { a: 0, b: 0, c: 0, expiresAt: 0, origin: aged.origin, born: bornHere(aged.bornAgoS, now) };
  algorithm.fromAges(aged, durationMs, now, state);
  // Buckets keep their limit in `c`; the windows ignore the limit argument.
  const ownExpiry = algorithm.expiresAt(state, state.c || 1, durationMs);
  state.expiresAt = Math.max(Math.ceil(now / 1000) + aged.expiresInS, Math.ceil(ownExpiry / 1000));
  return state;
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
      born: buf.readUInt32BE(o + 32),
    };
    o += STATE_BYTES;
    visit(key, state);
  }
}

/**
 * A peer's records, as sent (ages: see above). Throws RangeError on a batch that cannot be
 * split into records: nothing of it is applied then.
 */
export function decodeStates(buf: Buffer): AgedRecord[] {
  const records: AgedRecord[] = [];
  forEachRecord(buf, 0, buf.length, (key, s) =>
    records.push({ key, state: { a: s.a, b: s.b, c: s.c, expiresInS: s.expiresAt, origin: s.origin, bornAgoS: s.born } }),
  );
  return records;
}

const agedScratch: AgedState = { a: 0, b: 0, c: 0, expiresInS: 0, origin: 0, bornAgoS: 0 };

/**
 * A peer's records as sent, each visited in one reused AgedState (valid during the visit
 * only: what is kept must be copied, as rebaseState does). Checks the whole batch splits into
 * records first, so a batch that cannot is refused (RangeError) before anything is applied,
 * as decodeStates; the replication receive path, where an array and two objects per record
 * were most of the allocations (docs/durability.md, "The replication cost").
 */
export function forEachAgedRecord(buf: Buffer, visit: (key: string, state: AgedState) => void): void {
  for (let o = 0; o < buf.length; o += recordLengthAt(buf, o)) {
    if (o + 2 > buf.length || buf.readUInt16BE(o) > MAX_KEY_BYTES || o + recordLengthAt(buf, o) > buf.length) throw new RangeError("truncated state record");
  }
  const s = agedScratch;
  for (let o = 0; o < buf.length;) {
    const n = buf.readUInt16BE(o);
    let key = buf.toString("utf8", o + 2, o + 2 + n);
    // Lossy decoding would give two byte strings one key: what is not UTF-8 becomes "", an invalid key.
    if (key.includes("\ufffd") && !isUtf8(buf.subarray(o + 2, o + 2 + n))) key = "";
    o += 2 + n;
    s.a = buf.readDoubleBE(o);
    s.b = buf.readDoubleBE(o + 8);
    s.c = buf.readDoubleBE(o + 16);
    s.expiresInS = buf.readUInt32BE(o + 24);
    s.origin = buf.readUInt32BE(o + 28);
    s.bornAgoS = buf.readUInt32BE(o + 32);
    o += STATE_BYTES;
    visit(key, s);
  }
}

/** A birth sent as whole seconds ago (see above), as a unix second on this node's clock `now`. */
export function bornHere(bornAgoS: number, now: number): number {
  return Math.max(0, Math.floor(now / 1000) - bornAgoS);
}

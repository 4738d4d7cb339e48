import { REQUEST_BOUNDS, type LimitQuery } from "../../../decision.js";
import { BatchMode, decodeBatchRequest, encodeBatchRequest } from "./batch-wire.js";
import { parseStateKey } from "../../ring/state-key.js";
import { MAX_KEY_BYTES } from "../../records/state-records.js";

/**
 * LEASE (CALL method 17): a member whose share of a key's window runs low asks its owner for
 * more (docs/api.md, Shares). The request is the key's query as a one-item BATCH body, its
 * `cost` the requests wanted; the owner validates it as any BATCH item.
 */
export function encodeLeaseRequest(query: LimitQuery, wanted: number): Buffer {
  return encodeBatchRequest(BatchMode.DECIDE, 0, 0, [{ ...query, cost: wanted }]);
}

export function decodeLeaseRequest(buf: Buffer): LimitQuery {
  const request = decodeBatchRequest(buf);
  if (request.queries.length !== 1) throw new RangeError("LEASE: one query");
  return request.queries[0]!;
}

const REPLY_BYTES = 12;

/**
 * Reply: u32 requests granted (0: none, ask the owner per request), f64 the start of the window
 * they are counted in, unix ms on the owner's clock.
 */
export function encodeLeaseReply(granted: number, windowStart: number): Buffer {
  const buf = Buffer.allocUnsafe(REPLY_BYTES);
  buf.writeUInt32BE(granted, 0);
  buf.writeDoubleBE(windowStart, 4);
  return buf;
}

/** A reply out of bounds (more than a limit can hold, a window start that is no time) is refused whole. */
export function decodeLeaseReply(buf: Buffer): { granted: number; windowStart: number } {
  if (buf.length !== REPLY_BYTES) throw new RangeError("LEASE reply: 12 bytes");
  const granted = buf.readUInt32BE(0);
  const windowStart = buf.readDoubleBE(4);
  if (granted > REQUEST_BOUNDS.limit.max || !Number.isSafeInteger(windowStart) || windowStart < 0) throw new RangeError("LEASE reply out of bounds");
  return { granted, windowStart };
}

/** HOLD's reply (CALL method 18): whether the owner holds back a share for the asker, and for how many members in all. */
export function encodeHoldReply(held: boolean, holders: number): Buffer {
  return Buffer.from([held ? 1 : 0, Math.min(holders, 255)]);
}

export function decodeHoldReply(buf: Buffer): { held: boolean; holders: number } {
  if (buf.length !== 2 || buf[0]! > 1) throw new RangeError("HOLD reply: 2 bytes");
  return { held: buf[0] === 1, holders: buf[1]! };
}

/** DEBT_NOTICE (CALL method 20): the state key a charge took past its limit, and the start of the window (owner's clock, unix ms) the debt is in. */
export function encodeDebtNotice(stateKey: string, windowStart: number): Buffer {
  const key = Buffer.from(stateKey, "utf8");
  const buf = Buffer.allocUnsafe(8 + key.length);
  buf.writeDoubleBE(windowStart, 0);
  key.copy(buf, 8);
  return buf;
}

/** A notice that names no state key, or a window start that is no time, is refused whole. */
export function decodeDebtNotice(buf: Buffer): { stateKey: string; windowStart: number } {
  if (buf.length <= 8 || buf.length > 8 + MAX_KEY_BYTES) throw new RangeError("DEBT_NOTICE: no state key");
  const windowStart = buf.readDoubleBE(0);
  const stateKey = buf.toString("utf8", 8);
  if (!Number.isSafeInteger(windowStart) || windowStart < 0 || parseStateKey(stateKey) === undefined) throw new RangeError("DEBT_NOTICE out of bounds");
  return { stateKey, windowStart };
}

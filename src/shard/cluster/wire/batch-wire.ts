import { isUtf8 } from "node:buffer";
import { algorithmByCode, algorithmByName } from "../../../algorithms/index.js";
import { REQUEST_BOUNDS, newDecision, type Decision, type LimitQuery, type RemovedState, type ResetQuery } from "../../../decision.js";
import { forwardedWithinContract } from "./peer-data.js";

/*
 * Bodies of the CALLs that carry batches and resets between nodes (docs/api.md, "Batches
 * across owners"). Binary like the rest of the peer channel, never JSON; every decoder
 * checks bounds like the front end checks callers' data, and a body that is bad anywhere
 * throws (the CALL answers an error and nothing of it is applied).
 */

/** How an owner treats the items of a BATCH call. */
export const BatchMode = Object.freeze({
  /** the whole batch lives on this owner: decide and count all or nothing, in one step */
  DECIDE: 0,
  /** one owner's part of a batch across owners: count all or nothing, and hold as a reservation */
  RESERVE: 1,
});

/** Bounds a peer cannot exceed: a batch's items and how long an owner holds a reservation. */
export const MAX_WIRE_BATCH_ITEMS = 100;
export const MAX_HOLD_MS = 10_000;
const ITEM_FIXED_BYTES = 1 + 4 + 4 + 4 + 1 + 2 + 2;
/** A BATCH item's flags: the owner's overrides and shadow mode apply (LimitQuery.overridable). */
const OVERRIDABLE = 1;
const REPLY_ITEM_BYTES = 1 + 4 + 4 + 8 + 4 + 4 + 1;
/** After a reply item with APPLIED: u32 limit, u32 duration, u8 algorithm. */
const REPLY_APPLIED_BYTES = 4 + 4 + 1;
/** A reply item's flags: the owner applied an override's limit (it follows); answered allowed in shadow mode. */
const APPLIED = 1;
const SHADOW = 2;

export interface BatchRequest {
  mode: number;
  /** the coordinator's reservation number (RESERVE) */
  reservation: number;
  holdMs: number;
  queries: LimitQuery[];
}

/** BATCH: u8 mode, u32 reservation, u32 holdMs, u16 n, n × (u8 alg, u32 limit, u32 duration, u32 cost, u8 flags, u16 nsLen, u16 idLen, ns, id). */
export function encodeBatchRequest(mode: number, reservation: number, holdMs: number, queries: readonly LimitQuery[]): Buffer {
  const strings = queries.map((q) => [Buffer.from(q.namespace, "utf8"), Buffer.from(q.identifier, "utf8")] as const);
  let size = 11;
  for (const [ns, id] of strings) size += ITEM_FIXED_BYTES + ns.length + id.length;
  const buf = Buffer.allocUnsafe(size);
  let o = buf.writeUInt8(mode, 0);
  o = buf.writeUInt32BE(reservation >>> 0, o);
  o = buf.writeUInt32BE(holdMs, o);
  o = buf.writeUInt16BE(queries.length, o);
  queries.forEach((q, i) => {
    const [ns, id] = strings[i]!;
    o = buf.writeUInt8(q.algorithm.code, o);
    o = buf.writeUInt32BE(q.limit, o);
    o = buf.writeUInt32BE(q.duration, o);
    o = buf.writeUInt32BE(q.cost, o);
    o = buf.writeUInt8(q.overridable === true ? OVERRIDABLE : 0, o);
    o = buf.writeUInt16BE(ns.length, o);
    o = buf.writeUInt16BE(id.length, o);
    o += ns.copy(buf, o);
    o += id.copy(buf, o);
  });
  return buf;
}

export function decodeBatchRequest(buf: Buffer): BatchRequest {
  if (buf.length < 11) throw new RangeError("BATCH too short");
  const mode = buf.readUInt8(0);
  const reservation = buf.readUInt32BE(1);
  const holdMs = buf.readUInt32BE(5);
  const n = buf.readUInt16BE(9);
  if (mode !== BatchMode.DECIDE && mode !== BatchMode.RESERVE) throw new RangeError("BATCH: unknown mode");
  if (n < 1 || n > MAX_WIRE_BATCH_ITEMS || holdMs > MAX_HOLD_MS) throw new RangeError("BATCH out of bounds");
  const queries: LimitQuery[] = [];
  let o = 11;
  for (let i = 0; i < n; i++) {
    if (o + ITEM_FIXED_BYTES > buf.length) throw new RangeError("BATCH item truncated");
    const algorithm = algorithmByCode(buf.readUInt8(o));
    const limit = buf.readUInt32BE(o + 1);
    const duration = buf.readUInt32BE(o + 5);
    const cost = buf.readUInt32BE(o + 9);
    const flags = buf.readUInt8(o + 13);
    const nsLen = buf.readUInt16BE(o + 14);
    const idLen = buf.readUInt16BE(o + 16);
    if ((flags & ~OVERRIDABLE) !== 0) throw new RangeError("BATCH item: unknown flags");
    o += ITEM_FIXED_BYTES;
    if (o + nsLen + idLen > buf.length) throw new RangeError("BATCH item strings truncated");
    const namespace = strictUtf8(buf, o, o + nsLen);
    const identifier = strictUtf8(buf, o + nsLen, o + nsLen + idLen);
    o += nsLen + idLen;
    if (algorithm === undefined || !forwardedWithinContract(limit, duration, cost, namespace, identifier, false, flags === OVERRIDABLE))
      throw new RangeError("BATCH item out of contract");
    queries.push({ namespace, identifier, limit, duration, algorithm, cost, overridable: flags === OVERRIDABLE });
  }
  if (o !== buf.length) throw new RangeError("BATCH has trailing bytes");
  return { mode, reservation, holdMs, queries };
}

function strictUtf8(buf: Buffer, start: number, end: number): string {
  const bytes = buf.subarray(start, end);
  if (!isUtf8(bytes)) throw new RangeError("BATCH string is not UTF-8");
  return bytes.toString("utf8");
}

export interface BatchReply {
  allowed: boolean;
  decisions: Decision[];
  /** each item as a peek before the batch (see BatchDecision.standing) */
  standing: Decision[];
}

/**
 * Reply: u8 allowed, n × (u8 allowed, u32 remaining, u32 resetTime, f64 retryAfterMs, u32
 * standing remaining, u32 standing resetTime, u8 flags [APPLIED: u32 limit, u32 duration, u8
 * algorithm]): the owner's policy travels with each item, as on a DECIDE reply.
 */
export function encodeBatchReply(allowed: boolean, decisions: readonly Decision[], standing: readonly Decision[] | undefined): Buffer {
  let size = 1 + decisions.length * REPLY_ITEM_BYTES;
  for (const d of decisions) if (d.applied !== null) size += REPLY_APPLIED_BYTES;
  const buf = Buffer.allocUnsafe(size);
  let o = buf.writeUInt8(allowed ? 1 : 0, 0);
  decisions.forEach((d, i) => {
    const s = standing?.[i] ?? d;
    o = buf.writeUInt8(d.allowed ? 1 : 0, o);
    o = buf.writeUInt32BE(u32(d.remaining), o);
    o = buf.writeUInt32BE(u32(d.resetTime), o);
    o = buf.writeDoubleBE(d.retryAfterMs > 0 ? d.retryAfterMs : 0, o);
    o = buf.writeUInt32BE(u32(s.remaining), o);
    o = buf.writeUInt32BE(u32(s.resetTime), o);
    o = buf.writeUInt8((d.applied !== null ? APPLIED : 0) | (d.shadow ? SHADOW : 0), o);
    if (d.applied !== null) {
      o = buf.writeUInt32BE(u32(d.applied.limit), o);
      o = buf.writeUInt32BE(u32(d.applied.duration), o);
      o = buf.writeUInt8(d.applied.algorithm.code, o);
    }
  });
  return buf;
}

/** The reply to a BATCH of `queries`; an answer out of bounds (more remaining than the limit) is refused. */
export function decodeBatchReply(buf: Buffer, queries: readonly LimitQuery[]): BatchReply {
  if (buf.length < 1 + queries.length * REPLY_ITEM_BYTES) throw new RangeError("BATCH reply does not match its request");
  const allowed = buf.readUInt8(0) === 1;
  const decisions: Decision[] = [];
  const standing: Decision[] = [];
  let o = 1;
  for (const q of queries) {
    if (o + REPLY_ITEM_BYTES > buf.length) throw new RangeError("BATCH reply does not match its request");
    const d = newDecision();
    d.allowed = buf.readUInt8(o) === 1;
    d.remaining = buf.readUInt32BE(o + 1);
    d.resetTime = buf.readUInt32BE(o + 5);
    d.retryAfterMs = buf.readDoubleBE(o + 9);
    const s = newDecision();
    s.allowed = d.allowed;
    s.remaining = buf.readUInt32BE(o + 17);
    s.resetTime = buf.readUInt32BE(o + 21);
    // A blocked item is shown as it is; only an allowed one has a peek view of its own.
    if (!d.allowed) s.retryAfterMs = d.retryAfterMs;
    const flags = buf.readUInt8(o + 25);
    o += REPLY_ITEM_BYTES;
    if ((flags & ~(APPLIED | SHADOW)) !== 0) throw new RangeError("BATCH reply: unknown flags");
    let limit = q.limit;
    let duration = q.duration;
    if ((flags & APPLIED) !== 0) {
      if (o + REPLY_APPLIED_BYTES > buf.length) throw new RangeError("BATCH reply does not match its request");
      const algorithm = algorithmByCode(buf.readUInt8(o + 8));
      limit = buf.readUInt32BE(o);
      duration = buf.readUInt32BE(o + 4);
      o += REPLY_APPLIED_BYTES;
      if (
        algorithm === undefined ||
        limit > REQUEST_BOUNDS.limit.max ||
        !(duration >= REQUEST_BOUNDS.duration.min && duration <= REQUEST_BOUNDS.duration.max)
      ) {
        throw new RangeError("BATCH reply: applied limit out of contract");
      }
      d.applied = { limit, duration, algorithm };
      s.applied = d.applied;
    }
    if ((flags & SHADOW) !== 0) {
      if (!d.allowed) throw new RangeError("BATCH reply: a shadowed item must be allowed");
      d.shadow = true;
      s.shadow = true;
    }
    if (d.remaining > limit || s.remaining > limit || !(d.retryAfterMs >= 0 && d.retryAfterMs <= duration * 2000)) {
      throw new RangeError("BATCH reply out of bounds");
    }
    decisions.push(d);
    standing.push(s);
  }
  if (o !== buf.length) throw new RangeError("BATCH reply does not match its request");
  return { allowed, decisions, standing };
}

function u32(n: number): number {
  return n > 0 ? Math.min(0xffffffff, Math.floor(n)) : 0;
}

/** COMMIT / RELEASE: u32 reservation. */
export function encodeReservation(reservation: number): Buffer {
  const buf = Buffer.allocUnsafe(4);
  buf.writeUInt32BE(reservation >>> 0, 0);
  return buf;
}

export function decodeReservation(buf: Buffer): number {
  if (buf.length !== 4) throw new RangeError("reservation must be 4 bytes");
  return buf.readUInt32BE(0);
}

const ALL = 0xff;

/** RESET: u8 algorithm (255: all), u32 duration (0: all), u16 nsLen, u16 idLen, ns, id. */
export function encodeResetRequest(q: ResetQuery): Buffer {
  const ns = Buffer.from(q.namespace, "utf8");
  const id = Buffer.from(q.identifier, "utf8");
  const buf = Buffer.allocUnsafe(9 + ns.length + id.length);
  let o = buf.writeUInt8(q.algorithm?.code ?? ALL, 0);
  o = buf.writeUInt32BE(q.duration ?? 0, o);
  o = buf.writeUInt16BE(ns.length, o);
  o = buf.writeUInt16BE(id.length, o);
  o += ns.copy(buf, o);
  id.copy(buf, o);
  return buf;
}

export function decodeResetRequest(buf: Buffer): ResetQuery {
  if (buf.length < 9) throw new RangeError("RESET too short");
  const code = buf.readUInt8(0);
  const duration = buf.readUInt32BE(1);
  const nsLen = buf.readUInt16BE(5);
  const idLen = buf.readUInt16BE(7);
  if (9 + nsLen + idLen !== buf.length) throw new RangeError("RESET length mismatch");
  const algorithm = code === ALL ? undefined : algorithmByCode(code);
  const b = REQUEST_BOUNDS;
  const namespace = strictUtf8(buf, 9, 9 + nsLen);
  const identifier = strictUtf8(buf, 9 + nsLen, buf.length);
  if (
    (code !== ALL && algorithm === undefined) ||
    (duration !== 0 && !(duration >= b.duration.min && duration <= b.duration.max)) ||
    namespace.length < b.namespace.min ||
    !(identifier.length >= b.identifier.min && identifier.length <= b.identifier.max)
  ) {
    throw new RangeError("RESET out of contract");
  }
  return { namespace, identifier, algorithm, duration: duration === 0 ? undefined : duration };
}

/** Reply: n × (u8 algorithm, u32 duration). */
export function encodeRemoved(removed: readonly RemovedState[]): Buffer {
  const buf = Buffer.allocUnsafe(removed.length * 5);
  removed.forEach((r, i) => {
    buf.writeUInt8(algorithmByName(r.algorithm)!.code, i * 5);
    buf.writeUInt32BE(r.duration, i * 5 + 1);
  });
  return buf;
}

export function decodeRemoved(buf: Buffer): RemovedState[] {
  if (buf.length % 5 !== 0) throw new RangeError("RESET reply length");
  const removed: RemovedState[] = [];
  for (let o = 0; o < buf.length; o += 5) {
    const algorithm = algorithmByCode(buf.readUInt8(o));
    if (algorithm === undefined) throw new RangeError("RESET reply: unknown algorithm");
    removed.push({ algorithm: algorithm.name, duration: buf.readUInt32BE(o + 1) });
  }
  return removed;
}

/** GIVE_BACK: u32 age (ms since the decision was sent), then the query as a one-item BATCH body (same checks). */
export function encodeGiveBack(ageMs: number, query: LimitQuery): Buffer {
  const body = encodeBatchRequest(BatchMode.DECIDE, 0, 0, [query]);
  const buf = Buffer.allocUnsafe(4 + body.length);
  buf.writeUInt32BE(Math.min(0xffffffff, Math.max(0, Math.ceil(ageMs))), 0);
  body.copy(buf, 4);
  return buf;
}

export function decodeGiveBack(buf: Buffer): { ageMs: number; query: LimitQuery } {
  if (buf.length < 4) throw new RangeError("GIVE_BACK too short");
  const ageMs = buf.readUInt32BE(0);
  const request = decodeBatchRequest(buf.subarray(4));
  if (request.queries.length !== 1 || ageMs > MAX_GIVE_BACK_AGE_MS) throw new RangeError("GIVE_BACK out of bounds");
  return { ageMs, query: request.queries[0]! };
}

/** A decision older than this is not given back: its answer would have been written long before (a forward's deadline is far shorter). */
export const MAX_GIVE_BACK_AGE_MS = 60_000;

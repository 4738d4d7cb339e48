import { algorithmByCode } from "../algorithms/index.js";
import { DEGRADED_REASONS, type Decision, type LimitQuery } from "../decision.js";

/**
 * The binary records of the decision rings (byte-ring.ts): a query one way, its answer the
 * other, each tagged with the worker's slot number. Binary because the rings carry every
 * POST /limit and /limit/charge: no JSON, no object per field on the way.
 *
 * Query: u32 slot, u8 algorithm code, u8 flags, u16 namespace bytes, u16 identifier bytes,
 * u8 charge id bytes, pad, f64 limit, f64 duration, f64 cost, f64 now (the clock read once at the
 * worker's edge, so the owner decides at the instant the answer's times are written from), then the
 * three UTF-8 strings.
 * Answer: u32 slot, u8 flags, u8 degraded reason (0: none), u8 applied algorithm, pad,
 * f64 remaining, resetTime, retryAfterMs, debt, applied limit, applied duration.
 */
const Q_FIXED = 48;
export const ANSWER_BYTES = 56;

const CHARGE = 1;
const OVERRIDABLE = 2;
const HAS_CHARGE_ID = 4;

const ALLOWED = 1;
const SHADOW = 2;
const DUPLICATE = 4;
const APPLIED = 8;

/** The most bytes a query's record may take: UTF-8 is at most 3 bytes per UTF-16 code unit. */
export function queryMaxBytes(q: LimitQuery): number {
  return Q_FIXED + 3 * (q.namespace.length + q.identifier.length + (q.chargeId?.length ?? 0));
}

/** Write `q` at `at`; returns the bytes written. */
export function writeQuery(buf: Buffer, at: number, slot: number, q: LimitQuery, now: number): number {
  const cid = q.chargeId;
  buf.writeUInt32LE(slot, at);
  buf[at + 4] = q.algorithm.code;
  buf[at + 5] = (q.charge === true ? CHARGE : 0) | (q.overridable === true ? OVERRIDABLE : 0) | (cid !== undefined ? HAS_CHARGE_ID : 0);
  buf.writeDoubleLE(q.limit, at + 16);
  buf.writeDoubleLE(q.duration, at + 24);
  buf.writeDoubleLE(q.cost, at + 32);
  buf.writeDoubleLE(now, at + 40);
  let p = at + Q_FIXED;
  const ns = buf.write(q.namespace, p, "utf8");
  p += ns;
  const id = buf.write(q.identifier, p, "utf8");
  p += id;
  const c = cid === undefined ? 0 : buf.write(cid, p, "utf8");
  buf.writeUInt16LE(ns, at + 6);
  buf.writeUInt16LE(id, at + 8);
  buf[at + 10] = c;
  return p + c - at;
}

/**
 * Read a query record; undefined when it is not one the contract allows (an unknown
 * algorithm code): the owner checks what a worker sends as it checks a peer's.
 */
export function readQuery(buf: Buffer, at: number): LimitQuery | undefined {
  const algorithm = algorithmByCode(buf[at + 4]!);
  if (algorithm === undefined) return undefined;
  const flags = buf[at + 5]!;
  const nsEnd = at + Q_FIXED + buf.readUInt16LE(at + 6);
  const idEnd = nsEnd + buf.readUInt16LE(at + 8);
  const q: LimitQuery = {
    namespace: buf.toString("utf8", at + Q_FIXED, nsEnd),
    identifier: buf.toString("utf8", nsEnd, idEnd),
    limit: buf.readDoubleLE(at + 16),
    duration: buf.readDoubleLE(at + 24),
    algorithm,
    cost: buf.readDoubleLE(at + 32),
  };
  if ((flags & CHARGE) !== 0) q.charge = true;
  if ((flags & OVERRIDABLE) !== 0) q.overridable = true;
  if ((flags & HAS_CHARGE_ID) !== 0) q.chargeId = buf.toString("utf8", idEnd, idEnd + buf[at + 10]!);
  return q;
}

export const querySlot = (buf: Buffer, at: number): number => buf.readUInt32LE(at);
export const queryNow = (buf: Buffer, at: number): number => buf.readDoubleLE(at + 40);

export function writeAnswer(buf: Buffer, at: number, slot: number, d: Decision): void {
  buf.writeUInt32LE(slot, at);
  const applied = d.applied;
  buf[at + 4] = (d.allowed ? ALLOWED : 0) | (d.shadow ? SHADOW : 0) | (d.duplicate ? DUPLICATE : 0) | (applied !== null ? APPLIED : 0);
  buf[at + 5] = d.degraded === null ? 0 : DEGRADED_REASONS.indexOf(d.degraded) + 1;
  buf[at + 6] = applied?.algorithm.code ?? 0;
  buf.writeDoubleLE(d.remaining, at + 8);
  buf.writeDoubleLE(d.resetTime, at + 16);
  buf.writeDoubleLE(d.retryAfterMs, at + 24);
  buf.writeDoubleLE(d.debt, at + 32);
  buf.writeDoubleLE(applied?.limit ?? 0, at + 40);
  buf.writeDoubleLE(applied?.duration ?? 0, at + 48);
}

export const answerSlot = (buf: Buffer, at: number): number => buf.readUInt32LE(at);

/** Read an answer into `out` (reused: valid until the next read, as a Decider's Decision is). */
export function readAnswer(buf: Buffer, at: number, out: Decision): Decision {
  const flags = buf[at + 4]!;
  const reason = buf[at + 5]!;
  out.allowed = (flags & ALLOWED) !== 0;
  out.shadow = (flags & SHADOW) !== 0;
  out.duplicate = (flags & DUPLICATE) !== 0;
  out.degraded = reason === 0 ? null : (DEGRADED_REASONS[reason - 1] ?? "internal");
  out.remaining = buf.readDoubleLE(at + 8);
  out.resetTime = buf.readDoubleLE(at + 16);
  out.retryAfterMs = buf.readDoubleLE(at + 24);
  out.debt = buf.readDoubleLE(at + 32);
  const algorithm = (flags & APPLIED) !== 0 ? algorithmByCode(buf[at + 6]!) : undefined;
  out.applied = algorithm === undefined ? null : { limit: buf.readDoubleLE(at + 40), duration: buf.readDoubleLE(at + 48), algorithm };
  return out;
}

import { algorithmByCode } from "../algorithms/index.js";
import { DEGRADED_REASONS, type Decision, type LimitQuery } from "../decision.js";
import type { ByteRing } from "./byte-ring.js";

/**
 * The binary records of the decision rings (byte-ring.ts): a query one way, its answer the
 * other, each tagged with the worker's slot number. Binary because the rings carry every
 * POST /limit and /limit/charge: no JSON, no object per field on the way. Numbers go through
 * the ring's DataView (inlined by the JIT) rather than Buffer's readDoubleLE/writeDoubleLE
 * (a call each, through a scratch array): writeAnswer was the owner's largest cost in the hop.
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

/** Write `q` at `at` of `ring` (reserved for queryMaxBytes(q)); returns the bytes written. */
export function writeQuery(ring: ByteRing, at: number, slot: number, q: LimitQuery, now: number): number {
  const buf = ring.buffer;
  const v = ring.view;
  const cid = q.chargeId;
  v.setUint32(at, slot, true);
  buf[at + 4] = q.algorithm.code;
  buf[at + 5] = (q.charge === true ? CHARGE : 0) | (q.overridable === true ? OVERRIDABLE : 0) | (cid !== undefined ? HAS_CHARGE_ID : 0);
  v.setFloat64(at + 16, q.limit, true);
  v.setFloat64(at + 24, q.duration, true);
  v.setFloat64(at + 32, q.cost, true);
  v.setFloat64(at + 40, now, true);
  let p = at + Q_FIXED;
  const ns = buf.write(q.namespace, p, "utf8");
  p += ns;
  const id = buf.write(q.identifier, p, "utf8");
  p += id;
  const c = cid === undefined ? 0 : buf.write(cid, p, "utf8");
  v.setUint16(at + 6, ns, true);
  v.setUint16(at + 8, id, true);
  buf[at + 10] = c;
  return p + c - at;
}

/**
 * Read the query record of `len` bytes at `at`; undefined when it is not one the contract
 * allows (an unknown algorithm code, strings past the record's end): the owner checks what a
 * worker sends as it checks a peer's.
 */
export function readQuery(ring: ByteRing, at: number, len: number): LimitQuery | undefined {
  const buf = ring.buffer;
  const v = ring.view;
  const algorithm = algorithmByCode(buf[at + 4]!);
  if (algorithm === undefined || len < Q_FIXED) return undefined;
  const flags = buf[at + 5]!;
  const nsEnd = at + Q_FIXED + v.getUint16(at + 6, true);
  const idEnd = nsEnd + v.getUint16(at + 8, true);
  const cidEnd = idEnd + buf[at + 10]!;
  if (cidEnd - at > len) return undefined;
  const q: LimitQuery = {
    namespace: buf.toString("utf8", at + Q_FIXED, nsEnd),
    identifier: buf.toString("utf8", nsEnd, idEnd),
    limit: v.getFloat64(at + 16, true),
    duration: v.getFloat64(at + 24, true),
    algorithm,
    cost: v.getFloat64(at + 32, true),
  };
  if ((flags & CHARGE) !== 0) q.charge = true;
  if ((flags & OVERRIDABLE) !== 0) q.overridable = true;
  if ((flags & HAS_CHARGE_ID) !== 0) q.chargeId = buf.toString("utf8", idEnd, cidEnd);
  return q;
}

export const querySlot = (ring: ByteRing, at: number): number => ring.view.getUint32(at, true);
export const queryNow = (ring: ByteRing, at: number): number => ring.view.getFloat64(at + 40, true);

export function writeAnswer(ring: ByteRing, at: number, slot: number, d: Decision): void {
  const buf = ring.buffer;
  const v = ring.view;
  v.setUint32(at, slot, true);
  const applied = d.applied;
  buf[at + 4] = (d.allowed ? ALLOWED : 0) | (d.shadow ? SHADOW : 0) | (d.duplicate ? DUPLICATE : 0) | (applied !== null ? APPLIED : 0);
  buf[at + 5] = d.degraded === null ? 0 : DEGRADED_REASONS.indexOf(d.degraded) + 1;
  buf[at + 6] = applied?.algorithm.code ?? 0;
  v.setFloat64(at + 8, d.remaining, true);
  v.setFloat64(at + 16, d.resetTime, true);
  v.setFloat64(at + 24, d.retryAfterMs, true);
  v.setFloat64(at + 32, d.debt, true);
  v.setFloat64(at + 40, applied?.limit ?? 0, true);
  v.setFloat64(at + 48, applied?.duration ?? 0, true);
}

export const answerSlot = (ring: ByteRing, at: number): number => ring.view.getUint32(at, true);

/** Read an answer into `out` (reused: valid until the next read, as a Decider's Decision is). */
export function readAnswer(ring: ByteRing, at: number, out: Decision): Decision {
  const buf = ring.buffer;
  const v = ring.view;
  const flags = buf[at + 4]!;
  const reason = buf[at + 5]!;
  out.allowed = (flags & ALLOWED) !== 0;
  out.shadow = (flags & SHADOW) !== 0;
  out.duplicate = (flags & DUPLICATE) !== 0;
  out.degraded = reason === 0 ? null : (DEGRADED_REASONS[reason - 1] ?? "internal");
  out.remaining = v.getFloat64(at + 8, true);
  out.resetTime = v.getFloat64(at + 16, true);
  out.retryAfterMs = v.getFloat64(at + 24, true);
  out.debt = v.getFloat64(at + 32, true);
  const algorithm = (flags & APPLIED) !== 0 ? algorithmByCode(buf[at + 6]!) : undefined;
  out.applied = algorithm === undefined ? null : { limit: v.getFloat64(at + 40, true), duration: v.getFloat64(at + 48, true), algorithm };
  return out;
}

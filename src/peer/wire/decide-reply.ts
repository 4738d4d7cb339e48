// The DECIDE_REPLY body: one answer per item of a DECIDE, written into one buffer
// per frame and read without an object per item. The decoder checks that the body
// is consumed exactly; anything else is a FrameError and the connection is closed
// without acting on the frame.

import {
  BATCH_COUNT_BYTES,
  DECIDE_REPLY_APPLIED_BYTES,
  DECIDE_REPLY_GRANTED_BYTES,
  DECIDE_REPLY_ITEM_BYTES,
  DecideFlag,
  FRAME_HEADER_BYTES,
  FrameType,
  MAX_DECIDE_ITEMS,
} from "./constants.js";
import { FrameError } from "../errors.js";
import { getU32, putU32 } from "./decide-frames.js";
import { sealedFrameBytes, writeFrameHeader } from "./frame.js";

/** Where a DECIDE_REPLY's first item starts, after the frame header and count. */
const BATCH_START = FRAME_HEADER_BYTES + BATCH_COUNT_BYTES;

// ------------------------------------------------------------ DECIDE_REPLY

/** One decision: what a DECIDE_REPLY item carries. */
export interface DecideResult {
  /** 0 allowed, 1 blocked, 2 error (see DecideCode). */
  code: number;
  remaining: number;
  /** Unix seconds. */
  resetTime: number;
  retryAfterMs: number;
  /** DecideFlag bits; limit, duration and algorithm below mean something only with APPLIED */
  flags: number;
  /** the limit the owner applied (APPLIED) */
  limit: number;
  /** seconds (APPLIED) */
  duration: number;
  /** the applied algorithm's code (APPLIED) */
  algorithm: number;
  /** requests of the key's window the owner granted the sender beside this decision (GRANTED), else 0 */
  granted: number;
  /** the start of the granted window, unix seconds on the owner's clock (GRANTED) */
  grantWindowStart: number;
}

export function newDecideResult(): DecideResult {
  return { code: 0, remaining: 0, resetTime: 0, retryAfterMs: 0, flags: 0, limit: 0, duration: 0, algorithm: 0, granted: 0, grantWindowStart: 0 };
}

/** Writes one DECIDE_REPLY frame of a known item count. */
export class DecideReplyWriter {
  private buf: Buffer = Buffer.alloc(0);
  private at = 0;

  /**
   * Start a reply for `count` items. The frame is a fresh buffer handed to the socket, sized
   * for the worst case (every item APPLIED and GRANTED); finish() writes the header for what was put.
   */
  begin(count: number): void {
    const payload = BATCH_COUNT_BYTES + count * (DECIDE_REPLY_ITEM_BYTES + DECIDE_REPLY_APPLIED_BYTES + DECIDE_REPLY_GRANTED_BYTES);
    this.buf = Buffer.allocUnsafe(sealedFrameBytes(payload));
    this.buf.writeUInt32BE(count, FRAME_HEADER_BYTES);
    this.at = BATCH_START;
  }

  /**
   * One item; `applied` (flags has APPLIED): the limit, duration and algorithm code follow; a
   * grant (`granted` > 0, GRANTED is set for it): the granted requests and their window's start.
   */
  put(
    reqId: number,
    code: number,
    remaining: number,
    resetTime: number,
    retryAfterMs: number,
    flags = 0,
    limit = 0,
    duration = 0,
    algorithm = 0,
    granted = 0,
    grantWindowStart = 0,
  ): void {
    const b = this.buf;
    let at = this.at;
    putU32(b, at, reqId);
    b[at + 4] = code;
    putU32(b, at + 5, clampU32(remaining));
    putU32(b, at + 9, clampU32(resetTime));
    b.writeDoubleBE(retryAfterMs > 0 ? retryAfterMs : 0, at + 13); // NaN and negatives become 0
    const grant = granted >= 1 && granted <= 0xffffffff;
    b[at + 21] = (flags & (DecideFlag.APPLIED | DecideFlag.SHADOW | DecideFlag.DUPLICATE)) | (grant ? DecideFlag.GRANTED : 0);
    at += DECIDE_REPLY_ITEM_BYTES;
    if ((flags & DecideFlag.APPLIED) !== 0) {
      putU32(b, at, clampU32(limit));
      putU32(b, at + 4, clampU32(duration));
      b[at + 8] = algorithm & 0xff;
      at += DECIDE_REPLY_APPLIED_BYTES;
    }
    if (grant) {
      putU32(b, at, Math.floor(granted));
      putU32(b, at + 4, clampU32(grantWindowStart));
      at += DECIDE_REPLY_GRANTED_BYTES;
    }
    this.at = at;
  }

  finish(): Buffer {
    const payload = this.at - FRAME_HEADER_BYTES;
    writeFrameHeader(this.buf, 0, FrameType.DECIDE_REPLY, payload);
    const b = this.buf.subarray(0, sealedFrameBytes(payload));
    this.buf = Buffer.alloc(0);
    return b;
  }
}

/** A handler's number made safe for a u32 field (NaN and negatives become 0). */
function clampU32(n: number): number {
  if (!(n > 0)) return 0;
  if (n >= 0xffffffff) return 0xffffffff;
  return Math.floor(n);
}

/**
 * Receives one DECIDE_REPLY item; called with plain numbers so nothing is allocated. `limit`,
 * `duration` and `algorithm` are 0 unless `flags` has APPLIED; `granted` and
 * `grantWindowStart` 0 unless it has GRANTED.
 */
export type DecideReplySink = (
  reqId: number,
  code: number,
  remaining: number,
  resetTime: number,
  retryAfterMs: number,
  flags: number,
  limit: number,
  duration: number,
  algorithm: number,
  granted: number,
  grantWindowStart: number,
) => void;

/** Validate a DECIDE_REPLY body (items fill it exactly, codes and flags known), then hand each item to `sink`. */
export function readDecideReply(body: Buffer, sink: DecideReplySink): number {
  if (body.length < BATCH_COUNT_BYTES) throw new FrameError("DECIDE_REPLY without item count");
  const n = body.readUInt32BE(0);
  if (n > MAX_DECIDE_ITEMS || body.length < BATCH_COUNT_BYTES + n * DECIDE_REPLY_ITEM_BYTES) {
    throw new FrameError(`DECIDE_REPLY count ${n} does not match ${body.length} bytes`);
  }
  let at = BATCH_COUNT_BYTES;
  for (let i = 0; i < n; i++) {
    if (at + DECIDE_REPLY_ITEM_BYTES > body.length) throw new FrameError(`DECIDE_REPLY count ${n} does not match ${body.length} bytes`);
    if (body[at + 4]! > 2) throw new FrameError(`DECIDE_REPLY item ${i}: unknown code ${body[at + 4]}`);
    const flags = body[at + 21]!;
    if ((flags & ~(DecideFlag.APPLIED | DecideFlag.SHADOW | DecideFlag.GRANTED | DecideFlag.DUPLICATE)) !== 0)
      throw new FrameError(`DECIDE_REPLY item ${i}: unknown flags ${flags}`);
    at += itemBytes(flags);
  }
  if (at !== body.length) throw new FrameError(`DECIDE_REPLY count ${n} does not match ${body.length} bytes`);
  at = BATCH_COUNT_BYTES;
  for (let i = 0; i < n; i++) {
    const flags = body[at + 21]!;
    if ((flags & (DecideFlag.APPLIED | DecideFlag.GRANTED)) === 0) {
      sink(getU32(body, at), body[at + 4]!, getU32(body, at + 5), getU32(body, at + 9), body.readDoubleBE(at + 13), flags, 0, 0, 0, 0, 0);
    } else {
      const applied = (flags & DecideFlag.APPLIED) !== 0;
      const g = at + DECIDE_REPLY_ITEM_BYTES + (applied ? DECIDE_REPLY_APPLIED_BYTES : 0);
      const granted = (flags & DecideFlag.GRANTED) !== 0;
      sink(
        getU32(body, at),
        body[at + 4]!,
        getU32(body, at + 5),
        getU32(body, at + 9),
        body.readDoubleBE(at + 13),
        flags,
        applied ? getU32(body, at + 22) : 0,
        applied ? getU32(body, at + 26) : 0,
        applied ? body[at + 30]! : 0,
        granted ? getU32(body, g) : 0,
        granted ? getU32(body, g + 4) : 0,
      );
    }
    at += itemBytes(flags);
  }
  return n;
}

/** Bytes of a DECIDE_REPLY item with these flags. */
function itemBytes(flags: number): number {
  return (
    DECIDE_REPLY_ITEM_BYTES +
    ((flags & DecideFlag.APPLIED) !== 0 ? DECIDE_REPLY_APPLIED_BYTES : 0) +
    ((flags & DecideFlag.GRANTED) !== 0 ? DECIDE_REPLY_GRANTED_BYTES : 0)
  );
}

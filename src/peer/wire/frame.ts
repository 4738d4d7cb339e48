// Length-prefixed framing: `u32 BE length` (bytes after the length field),
// then `u8 type`, then the payload, then (after the handshake) a TAG_BYTES
// tag. The decoder turns arbitrary TCP chunks back into whole frames and,
// once it has an opener, checks every tag before a frame is delivered.

import { FRAME_HEADER_BYTES, MAX_FRAME_BYTES, MAX_FRAME_TYPE, TAG_BYTES } from "./constants.js";
import { FrameAuthError, FrameError } from "../errors.js";
import type { FrameOpener } from "../link/session.js";

/**
 * Called once per complete frame. `body` (the payload, without length, type
 * and tag) is a view into a buffer the decoder reuses: it is valid only until
 * the callback returns. Copy anything kept longer.
 */
export type FrameHandler = (type: number, body: Buffer) => void;

/** Beyond this, a drained accumulation buffer is dropped instead of kept for reuse. */
const KEEP_ACCUMULATOR_BYTES = 256 * 1024;
const INITIAL_ACCUMULATOR_BYTES = 16 * 1024;

export class FrameDecoder {
  /** Largest accepted `length`; lowered while unauthenticated, raised after the handshake. */
  maxFrameBytes: number;
  /**
   * Set once the handshake has made session keys: from then on every frame must end in
   * the tag of the next sequence number, and one that does not throws before delivery.
   */
  opener: FrameOpener | null = null;
  private readonly onFrame: FrameHandler;
  // Bytes of an incomplete frame carried over between chunks. In the common
  // case (a chunk holds only whole frames) this stays empty and frames are
  // read straight from the chunk with no copy.
  private acc: Buffer | null = null;
  private accLen = 0;
  private stopped = false;

  constructor(onFrame: FrameHandler, maxFrameBytes: number = MAX_FRAME_BYTES) {
    this.onFrame = onFrame;
    this.maxFrameBytes = maxFrameBytes;
  }

  /**
   * Stop delivering frames, including the rest of the chunk being decoded.
   * The owner calls this when it closes the connection from inside onFrame,
   * so nothing after a bad frame is acted upon.
   */
  stop(): void {
    this.stopped = true;
    this.acc = null;
    this.accLen = 0;
  }

  /** Bytes held for an incomplete frame. */
  get buffered(): number {
    return this.accLen;
  }

  /** Feed one chunk. Throws FrameError on an oversized length or an unknown type. */
  push(chunk: Buffer): void {
    if (this.stopped) return;
    let buf: Buffer;
    let end: number;
    if (this.accLen === 0) {
      buf = chunk;
      end = chunk.length;
    } else {
      this.append(chunk);
      buf = this.acc!;
      end = this.accLen;
    }
    let pos = 0;
    while (!this.stopped) {
      const avail = end - pos;
      if (avail < 4) break;
      const len = buf.readUInt32BE(pos);
      // Checked as soon as the header is in, not when the body has arrived:
      // a peer announcing a huge frame is cut off before we buffer any of it.
      if (len === 0 || len > this.maxFrameBytes) {
        throw new FrameError(`frame length ${len} outside 1..${this.maxFrameBytes}`);
      }
      if (avail < 5) break;
      const type = buf[pos + 4]!;
      if (type === 0 || type > MAX_FRAME_TYPE) throw new FrameError(`unknown frame type ${type}`);
      if (avail < 4 + len) break;
      const frameEnd = pos + 4 + len;
      const opener = this.opener;
      let body: Buffer;
      if (opener === null) {
        body = buf.subarray(pos + FRAME_HEADER_BYTES, frameEnd);
      } else {
        if (!opener.open(buf, pos, frameEnd)) throw new FrameAuthError();
        body = buf.subarray(pos + FRAME_HEADER_BYTES, frameEnd - TAG_BYTES);
      }
      pos = frameEnd;
      this.onFrame(type, body);
    }
    if (this.stopped) return;
    const rest = end - pos;
    if (buf === chunk) {
      if (rest > 0) {
        this.accLen = 0;
        this.append(chunk.subarray(pos));
      }
    } else if (rest === 0) {
      this.accLen = 0;
      if (this.acc!.length > KEEP_ACCUMULATOR_BYTES) this.acc = null;
    } else if (pos > 0) {
      this.acc!.copyWithin(0, pos, end);
      this.accLen = rest;
    }
  }

  private append(bytes: Buffer): void {
    const need = this.accLen + bytes.length;
    let acc = this.acc;
    if (acc === null || acc.length < need) {
      let cap = acc === null ? INITIAL_ACCUMULATOR_BYTES : acc.length * 2;
      while (cap < need) cap *= 2;
      const grown = Buffer.allocUnsafe(cap);
      if (acc !== null && this.accLen > 0) acc.copy(grown, 0, 0, this.accLen);
      this.acc = acc = grown;
    }
    bytes.copy(acc, this.accLen);
    this.accLen = need;
  }
}

/**
 * Write the header of a sealed frame (one sent after the handshake) whose payload is
 * `payloadBytes`: the length counts the TAG_BYTES of room the caller leaves after the
 * payload for FrameSealer.
 */
export function writeFrameHeader(buf: Buffer, offset: number, type: number, payloadBytes: number): void {
  buf.writeUInt32BE(payloadBytes + 1 + TAG_BYTES, offset);
  buf[offset + 4] = type;
}

/** Bytes of a sealed frame with a payload of `payloadBytes`. */
export function sealedFrameBytes(payloadBytes: number): number {
  return FRAME_HEADER_BYTES + payloadBytes + TAG_BYTES;
}

/** A whole sealed frame (header, payload, room for its tag) in a new buffer; for the cold path. */
export function encodeFrame(type: number, payload?: Buffer): Buffer {
  const n = payload === undefined ? 0 : payload.length;
  if (n + 1 + TAG_BYTES > MAX_FRAME_BYTES) throw new FrameError(`payload of ${n} bytes exceeds the frame limit`);
  const frame = Buffer.alloc(sealedFrameBytes(n));
  writeFrameHeader(frame, 0, type, n);
  if (payload !== undefined) payload.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

/** A handshake frame (HELLO, CHALLENGE, PROOF): no tag, there are no keys yet. */
export function encodeHandshakeFrame(type: number, payload: Buffer): Buffer {
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  frame.writeUInt32BE(payload.length + 1, 0);
  frame[4] = type;
  payload.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

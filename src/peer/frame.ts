// Length-prefixed framing: `u32 BE length` (bytes after the length field),
// then `u8 type`, then the payload. The decoder turns arbitrary TCP chunks
// back into whole frames.

import { FRAME_HEADER_BYTES, MAX_FRAME_BYTES, MAX_FRAME_TYPE } from "./constants.js";
import { FrameError } from "./errors.js";

/**
 * Called once per complete frame. `body` (the payload, without length and
 * type) is a view into a buffer the decoder reuses: it is valid only until
 * the callback returns. Copy anything kept longer.
 */
export type FrameHandler = (type: number, body: Buffer) => void;

/** Beyond this, a drained accumulation buffer is dropped instead of kept for reuse. */
const KEEP_ACCUMULATOR_BYTES = 256 * 1024;
const INITIAL_ACCUMULATOR_BYTES = 16 * 1024;

export class FrameDecoder {
  /** Largest accepted `length`; lowered while unauthenticated, raised after the handshake. */
  maxFrameBytes: number;
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
      const body = buf.subarray(pos + FRAME_HEADER_BYTES, pos + 4 + len);
      pos += 4 + len;
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

/** Write a frame header for a payload of `payloadBytes` at `offset`. */
export function writeFrameHeader(buf: Buffer, offset: number, type: number, payloadBytes: number): void {
  buf.writeUInt32BE(payloadBytes + 1, offset);
  buf[offset + 4] = type;
}

/** A whole frame (header + payload) in a new buffer; for the cold path. */
export function encodeFrame(type: number, payload?: Buffer): Buffer {
  const n = payload === undefined ? 0 : payload.length;
  if (n + 1 > MAX_FRAME_BYTES) throw new FrameError(`payload of ${n} bytes exceeds the frame limit`);
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + n);
  writeFrameHeader(frame, 0, type, n);
  if (payload !== undefined) payload.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

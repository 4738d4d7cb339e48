import * as F from "./frames.js";
import { ConnectionError } from "./frames.js";
import { CompressionError, HpackDecoder } from "./hpack/hpack.js";
import type { H2Stream } from "./stream.js";

/** a header block's frames (HEADERS + CONTINUATION): past it, a flood (CVE-2024-27316) */
const MAX_BLOCK_FRAMES = 64;

export interface Block {
  streamId: number;
  endStream: boolean;
  bytes: Buffer;
  /** its priority names its own stream: a stream error (RFC 9113 §5.3.1) */
  selfDependent: boolean;
}

/**
 * HEADERS and its CONTINUATION frames gathered into one block, bounded in frames and in
 * compressed bytes before anything is kept, and decoded by the connection's one HPACK
 * decoder. Nothing but CONTINUATION may come while a block is open (RFC 9113 §6.10).
 */
export class HeaderBlocks {
  private readonly hpack = new HpackDecoder();
  private open: { streamId: number; endStream: boolean; selfDependent: boolean; parts: Buffer[]; bytes: number; frames: number } | undefined;

  /** `maxBytes`: the compressed bytes of one block */
  constructor(private readonly maxBytes: number) {}

  get pending(): boolean {
    return this.open !== undefined;
  }

  /** A HEADERS frame; the whole block when it carries END_HEADERS. */
  headers(flags: number, id: number, buf: Buffer, start: number, end: number): Block | undefined {
    if (id === 0) throw new ConnectionError(F.PROTOCOL_ERROR, "HEADERS on stream 0");
    if (flags & F.PADDED) {
      if (end === start || buf[start]! > end - start - 1) throw new ConnectionError(F.PROTOCOL_ERROR, "padding past the frame");
      end -= buf[start]!;
      start++;
    }
    let selfDependent = false;
    if (flags & F.PRIORITY_FLAG) {
      if (end - start < 5) throw new ConnectionError(F.FRAME_SIZE_ERROR, "HEADERS too short for its priority");
      selfDependent = (buf.readUInt32BE(start) & 0x7fffffff) === id;
      start += 5;
    }
    const endStream = (flags & F.END_STREAM) !== 0;
    if (flags & F.END_HEADERS) return { streamId: id, endStream, selfDependent, bytes: buf.subarray(start, end) };
    // the read's buffer is not kept past the read
    this.open = { streamId: id, endStream, selfDependent, parts: [Buffer.from(buf.subarray(start, end))], bytes: end - start, frames: 1 };
    return undefined;
  }

  continuation(flags: number, id: number, buf: Buffer, start: number, end: number): Block | undefined {
    const open = this.open;
    if (open === undefined || id !== open.streamId) throw new ConnectionError(F.PROTOCOL_ERROR, "CONTINUATION without its HEADERS");
    open.bytes += end - start;
    if (++open.frames > MAX_BLOCK_FRAMES || open.bytes > this.maxBytes) throw new ConnectionError(F.ENHANCE_YOUR_CALM, "header block too large");
    open.parts.push(Buffer.from(buf.subarray(start, end)));
    if ((flags & F.END_HEADERS) === 0) return undefined;
    this.open = undefined;
    return { streamId: open.streamId, endStream: open.endStream, selfDependent: open.selfDependent, bytes: Buffer.concat(open.parts) };
  }

  /** Decodes `block` into `stream`'s request fields (or only into the tables); returns the header list's size. */
  decode(block: Block, stream: H2Stream | undefined): number {
    try {
      return this.hpack.decode(block.bytes, 0, block.bytes.length, stream === undefined ? ignoreField : (name, value) => takeField(stream, name, value));
    } catch (err) {
      if (err instanceof CompressionError) throw new ConnectionError(F.COMPRESSION_ERROR, err.message);
      throw err;
    }
  }
}

function ignoreField(): void {}

const METHOD = 1;
const SCHEME = 2;
const PATH = 4;
const AUTHORITY = 8;
/** a regular field was seen: no pseudo-header may follow */
const REGULAR = 16;

/**
 * The request fields a call reads; every other field is decoded, counted in the list's size
 * and dropped. A request that breaks RFC 9113 §8.2-8.3 (an upper-case name, a pseudo-header
 * unknown, repeated or after a regular field, a connection-specific field, `te` other than
 * "trailers", a content-length not a number) is marked malformed: a stream error.
 */
function takeField(stream: H2Stream, name: string, value: string): void {
  if (name.charCodeAt(0) === 0x3a) {
    let bit: number;
    switch (name) {
      case ":method":
        stream.method = value;
        bit = METHOD;
        break;
      case ":path":
        stream.path = value;
        bit = PATH;
        break;
      case ":scheme":
        stream.scheme = value;
        bit = SCHEME;
        break;
      case ":authority":
        bit = AUTHORITY;
        break;
      default:
        stream.malformed = true;
        return;
    }
    if (stream.fieldsSeen & (bit | REGULAR)) stream.malformed = true;
    stream.fieldsSeen |= bit;
    return;
  }
  stream.fieldsSeen |= REGULAR;
  switch (name) {
    case "content-type":
      stream.contentType = value;
      return;
    case "authorization":
      stream.authorization = value;
      return;
    case "grpc-timeout":
      stream.grpcTimeout = value;
      return;
    case "grpc-encoding":
      stream.grpcEncoding = value;
      return;
    case "te":
      if (value !== "trailers") stream.malformed = true;
      return;
    case "content-length":
      if (!/^\d{1,15}$/.test(value) || stream.contentLeft >= 0) stream.malformed = true;
      else stream.contentLeft = Number(value);
      return;
    case "connection":
    case "keep-alive":
    case "proxy-connection":
    case "transfer-encoding":
    case "upgrade":
      stream.malformed = true;
      return;
    default:
      if (!lowerCase(name)) stream.malformed = true;
  }
}

/** A field name with no upper-case letter, not empty (RFC 9113 §8.2.1). */
function lowerCase(name: string): boolean {
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) return false;
  }
  return name.length > 0;
}

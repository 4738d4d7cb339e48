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
}

/**
 * HEADERS and its CONTINUATION frames gathered into one block, bounded in frames and in
 * compressed bytes before anything is kept, and decoded by the connection's one HPACK
 * decoder. Nothing but CONTINUATION may come while a block is open (RFC 9113 §6.10).
 */
export class HeaderBlocks {
  private readonly hpack = new HpackDecoder();
  private open: { streamId: number; endStream: boolean; parts: Buffer[]; bytes: number; frames: number } | undefined;

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
    if (flags & F.PRIORITY_FLAG) {
      if (end - start < 5) throw new ConnectionError(F.FRAME_SIZE_ERROR, "HEADERS too short for its priority");
      start += 5;
    }
    const endStream = (flags & F.END_STREAM) !== 0;
    if (flags & F.END_HEADERS) return { streamId: id, endStream, bytes: buf.subarray(start, end) };
    // the read's buffer is not kept past the read
    this.open = { streamId: id, endStream, parts: [Buffer.from(buf.subarray(start, end))], bytes: end - start, frames: 1 };
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
    return { streamId: open.streamId, endStream: open.endStream, bytes: Buffer.concat(open.parts) };
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

/** The request fields a call reads; every other field is decoded, counted in the list's size and dropped. */
function takeField(stream: H2Stream, name: string, value: string): void {
  switch (name) {
    case ":method":
      stream.method = value;
      return;
    case ":path":
      stream.path = value;
      return;
    case ":scheme":
      stream.scheme = value;
      return;
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
  }
}

/**
 * HTTP/2 on a raw socket, for what a well-behaved client never sends: floods, bad settings,
 * broken header blocks, windows held shut. Writes exactly the frames given and keeps every
 * frame the server sends, with its header blocks decoded (the server's blocks are HPACK
 * literals: a fresh decoder per connection reads them).
 */
import net from "node:net";
import * as F from "../../../src/rls/h2/frames.js";
import { HpackDecoder } from "../../../src/rls/h2/hpack/hpack.js";
import { hpackInteger } from "../../../src/rls/h2/response-blocks.js";
import { until } from "../../harness/wait.js";

export interface Frame {
  type: number;
  flags: number;
  id: number;
  payload: Buffer;
  /** HEADERS: the decoded fields */
  fields?: Record<string, string>;
}

export class RawH2 {
  readonly frames: Frame[] = [];
  closed = false;
  private rest = Buffer.alloc(0);
  private readonly hpack = new HpackDecoder();

  private constructor(readonly socket: net.Socket) {
    socket.on("data", (chunk: Buffer) => this.read(chunk));
    socket.on("close", () => (this.closed = true));
    socket.on("error", () => (this.closed = true));
  }

  /** Connects; by default sends the preface and an empty SETTINGS. */
  static async connect(port: number, options: { preface?: boolean; settings?: [number, number][] } = {}): Promise<RawH2> {
    const socket = net.connect(port, "127.0.0.1");
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    const c = new RawH2(socket);
    if (options.preface !== false) c.send(Buffer.concat([F.PREFACE, F.settingsFrame(options.settings ?? [])]));
    return c;
  }

  send(bytes: Buffer): void {
    if (!this.socket.destroyed) this.socket.write(bytes);
  }

  frame(type: number, flags: number, id: number, payload: Buffer = Buffer.alloc(0)): void {
    this.send(F.frame(type, flags, id, payload));
  }

  private read(chunk: Buffer): void {
    let buf = Buffer.concat([this.rest, chunk]);
    while (buf.length >= 9) {
      const length = buf.readUIntBE(0, 3);
      if (buf.length < 9 + length) break;
      const f: Frame = { type: buf[3]!, flags: buf[4]!, id: buf.readUInt32BE(5) & 0x7fffffff, payload: Buffer.from(buf.subarray(9, 9 + length)) };
      if (f.type === F.HEADERS) {
        const fields: Record<string, string> = {};
        this.hpack.decode(f.payload, 0, f.payload.length, (n, v) => (fields[n] = v));
        f.fields = fields;
      }
      this.frames.push(f);
      buf = buf.subarray(9 + length);
    }
    this.rest = Buffer.from(buf);
  }

  /** The first frame (from `from` on) that `match` accepts, waiting for it. */
  async waitFor(what: string, match: (f: Frame) => boolean, ms = 10_000, from = 0): Promise<Frame> {
    let found: Frame | undefined;
    await until(what, () => (found = this.frames.slice(from).find(match)) !== undefined, ms, 10);
    return found!;
  }

  /** GOAWAY's error code, once it comes. */
  async goaway(ms = 10_000): Promise<number> {
    const f = await this.waitFor("GOAWAY", (f) => f.type === F.GOAWAY, ms);
    return f.payload.readUInt32BE(4);
  }

  async waitClosed(ms = 10_000): Promise<void> {
    await until("the server closes the connection", () => this.closed, ms, 10);
  }

  /** The trailers (END_STREAM HEADERS) of stream `id`. */
  trailers(id: number, ms = 10_000): Promise<Frame> {
    return this.waitFor(`END_STREAM HEADERS on stream ${id}`, (f) => f.id === id && f.type === F.HEADERS && (f.flags & F.END_STREAM) !== 0, ms);
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A header block of literals without indexing (new names); `indexed` names are literals with incremental indexing. */
export function headerBlock(fields: [string, string][], indexed: readonly string[] = []): Buffer {
  const out: number[] = [];
  for (const [name, value] of fields) {
    out.push(indexed.includes(name) ? 0x40 : 0);
    for (const s of [name, value]) out.push(...hpackInteger(0, 7, s.length), ...Buffer.from(s, "latin1"));
  }
  return Buffer.from(out);
}

export const CHECK_PATH = "/grpc.health.v1.Health/Check";
export const WATCH_PATH = "/grpc.health.v1.Health/Watch";

/** The request fields of a gRPC call to `path`. */
export function grpcFields(path: string, extra: [string, string][] = []): [string, string][] {
  return [
    [":method", "POST"],
    [":scheme", "http"],
    [":path", path],
    [":authority", "localhost"],
    ["content-type", "application/grpc"],
    ["te", "trailers"],
    ...extra,
  ];
}

/** A gRPC message: not compressed, length, bytes. */
export function grpcMessage(message: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

/** HEADERS (END_HEADERS) and DATA (END_STREAM) of a health Check with an empty request. */
export function checkCall(id: number): Buffer {
  return Buffer.concat([F.frame(F.HEADERS, F.END_HEADERS, id, headerBlock(grpcFields(CHECK_PATH))), F.frame(F.DATA, F.END_STREAM, id, grpcMessage())]);
}

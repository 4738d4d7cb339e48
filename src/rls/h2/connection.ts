import type { Socket } from "node:net";
import { FrameBudget } from "./budget.js";
import * as F from "./frames.js";
import { ConnectionError } from "./frames.js";
import { CompressionError, HpackDecoder } from "./hpack.js";
import { applySettings, type PeerSettings } from "./settings.js";
import { H2Stream, type StreamOwner } from "./stream.js";

/** What every connection of a server shares: its bounds, and the bytes of unfinished requests node-wide. */
export interface H2Limits {
  /** SETTINGS_MAX_CONCURRENT_STREAMS, enforced: a stream past it is refused (REFUSED_STREAM) */
  maxConcurrentStreams: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2 sizes), enforced: a list past it gets 431 */
  maxHeaderListBytes: number;
  /** one request body's bound; past it the stream is answered RESOURCE_EXHAUSTED */
  maxBodyBytes: number;
  /** bytes of request bodies not yet dispatched, summed over the node's connections */
  pending: { bytes: number; readonly max: number };
}

/** Called with a request whose body is complete; answers through the stream. */
export type StreamHandler = (stream: H2Stream, tooLarge: boolean) => void;

/** the connection window we keep open for request bodies: topped up at half */
const CONNECTION_WINDOW = 1 << 20;
/** a stream's window is the default (we announce no SETTINGS_INITIAL_WINDOW_SIZE); topped up at half */
const STREAM_WINDOW = F.DEFAULT_WINDOW;
/** a header block's compressed bytes and frames (HEADERS + CONTINUATION): past either, a flood (CVE-2024-27316) */
const MAX_BLOCK_FRAMES = 64;
/** frames that cost work and carry no request: a burst, then per second (budget.ts) */
const CHEAP_FRAMES_BURST = 2000;
const CHEAP_FRAMES_PER_S = 1000;
/** streams reset by the client before their answer (CVE-2023-44487) */
const RESETS_BURST = 1000;
const RESETS_PER_S = 100;
/** write backlog past which reading stops until it drains (CVE-2019-9517) */
const WRITE_HIGH_WATER = 256 * 1024;
/** the part of a read's output written as a copy rather than handing over the buffer */
const COPY_BELOW = 4096;

/**
 * One HTTP/2 connection (RFC 9113), server side, built for unary gRPC: every read is parsed
 * whole, the answers it produces go into one buffer, and that buffer is one socket write.
 * Invariants: every header block passes through the one HPACK decoder in order, a refused
 * or reset stream's too; every DATA byte is counted against the connection window, whatever
 * its stream's state; the streams held never exceed maxConcurrentStreams.
 */
export class H2Connection implements StreamOwner {
  out = Buffer.allocUnsafe(16 * 1024);
  private outLen = 0;
  peerMaxFrame = F.DEFAULT_MAX_FRAME;
  connectionWindow = F.DEFAULT_WINDOW;
  private readonly peer: PeerSettings = { initialWindow: F.DEFAULT_WINDOW, maxFrame: F.DEFAULT_MAX_FRAME };
  readonly streams = new Map<number, H2Stream>();
  private readonly blockedStreams = new Set<H2Stream>();
  private readonly hpack = new HpackDecoder();
  private lastStreamId = 0;
  private prefaceLeft = F.PREFACE.length;
  /** the client's first SETTINGS arrived (the preface is complete) */
  ready = false;
  private rest: Buffer | undefined = undefined;
  private block: { streamId: number; endStream: boolean; parts: Buffer[]; bytes: number; frames: number } | undefined;
  private connectionRecvWindow = CONNECTION_WINDOW;
  private connectionUnacked = 0;
  private inRead = false;
  private flushQueued = false;
  private readonly cheapFrames: FrameBudget;
  private readonly resets: FrameBudget;
  /** GOAWAY sent: streams above this id are not served */
  private goawayLastId = -1;
  private peerGoaway = false;
  closed = false;
  /** ms since the epoch: the connection's start, its last stream, when reading stopped for the backlog (0: reading) */
  readonly openedAt: number;
  lastActive: number;
  pausedAt = 0;

  constructor(
    readonly socket: Socket,
    private readonly handler: StreamHandler,
    private readonly limits: H2Limits,
    private readonly onClosed: (c: H2Connection) => void,
    now: number,
  ) {
    this.openedAt = this.lastActive = now;
    this.cheapFrames = new FrameBudget(CHEAP_FRAMES_BURST, CHEAP_FRAMES_PER_S, now);
    this.resets = new FrameBudget(RESETS_BURST, RESETS_PER_S, now);
    socket.setNoDelay(true);
    this.emit(
      F.settingsFrame([
        [F.SETTINGS_MAX_CONCURRENT_STREAMS, limits.maxConcurrentStreams],
        [F.SETTINGS_MAX_HEADER_LIST_SIZE, limits.maxHeaderListBytes],
        [F.SETTINGS_ENABLE_PUSH, 0],
      ]),
    );
    this.emit(F.windowUpdateFrame(0, CONNECTION_WINDOW - F.DEFAULT_WINDOW));
    this.flush();
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("drain", () => this.resume());
    socket.on("error", () => {});
    socket.on("close", () => this.gone());
  }

  // --- output: one buffer per read, one write ---

  reserve(n: number): number {
    if (this.outLen + n > this.out.length) {
      const bigger = Buffer.allocUnsafe(Math.max(this.out.length * 2, this.outLen + n));
      this.out.copy(bigger, 0, 0, this.outLen);
      this.out = bigger;
    }
    const at = this.outLen;
    this.outLen += n;
    if (!this.inRead && !this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(() => this.flush());
    }
    return at;
  }

  private emit(bytes: Buffer): void {
    const at = this.reserve(bytes.length); // first: it may replace this.out
    bytes.copy(this.out, at);
  }

  private flush(): void {
    this.flushQueued = false;
    if (this.outLen === 0 || this.closed) return;
    let data: Buffer;
    if (this.outLen < COPY_BELOW) data = Buffer.from(this.out.subarray(0, this.outLen));
    else {
      data = this.out.subarray(0, this.outLen);
      this.out = Buffer.allocUnsafe(this.out.length);
    }
    this.outLen = 0;
    this.socket.write(data);
    if (this.socket.writableLength > WRITE_HIGH_WATER && this.pausedAt === 0) {
      // The client does not read what it asks for: neither do we, until it does.
      this.pausedAt = Date.now();
      this.socket.pause();
    }
  }

  private resume(): void {
    if (this.pausedAt === 0 || this.closed) return;
    this.pausedAt = 0;
    this.socket.resume();
  }

  // --- input ---

  private onData(chunk: Buffer): void {
    if (this.closed) return;
    let buf = this.rest === undefined ? chunk : Buffer.concat([this.rest, chunk]);
    this.rest = undefined;
    this.inRead = true;
    const now = Date.now();
    try {
      let p = 0;
      if (this.prefaceLeft > 0) {
        const n = Math.min(this.prefaceLeft, buf.length);
        const from = F.PREFACE.length - this.prefaceLeft;
        if (F.PREFACE.compare(buf, 0, n, from, from + n) !== 0) throw new ConnectionError(F.PROTOCOL_ERROR, "not the HTTP/2 preface");
        this.prefaceLeft -= n;
        p = n;
      }
      while (buf.length - p >= F.FRAME_HEADER) {
        const length = (buf[p]! << 16) | (buf[p + 1]! << 8) | buf[p + 2]!;
        if (length > F.DEFAULT_MAX_FRAME) throw new ConnectionError(F.FRAME_SIZE_ERROR, "frame larger than SETTINGS_MAX_FRAME_SIZE");
        if (buf.length - p < F.FRAME_HEADER + length) break;
        const type = buf[p + 3]!;
        const flags = buf[p + 4]!;
        const id = buf.readUInt32BE(p + 5) & 0x7fffffff;
        p += F.FRAME_HEADER;
        this.frame(type, flags, id, buf, p, p + length, now);
        p += length;
        if (this.closed) return;
      }
      if (p < buf.length) this.rest = p === 0 ? buf : buf.subarray(p);
      buf = F.PREFACE; // let go of the read
    } catch (err) {
      if (!(err instanceof ConnectionError)) throw err;
      this.goaway(err.code);
      this.inRead = false;
      this.flush();
      this.socket.end();
      this.gone();
      return;
    } finally {
      this.inRead = false;
    }
    if (this.connectionUnacked >= CONNECTION_WINDOW / 2) {
      this.emit(F.windowUpdateFrame(0, this.connectionUnacked));
      this.connectionRecvWindow += this.connectionUnacked;
      this.connectionUnacked = 0;
    }
    this.flush();
  }

  private frame(type: number, flags: number, id: number, buf: Buffer, start: number, end: number, now: number): void {
    if (this.block !== undefined && type !== F.CONTINUATION) throw new ConnectionError(F.PROTOCOL_ERROR, "header block interrupted");
    if (!this.ready && type !== F.SETTINGS) throw new ConnectionError(F.PROTOCOL_ERROR, "the preface's SETTINGS must come first");
    switch (type) {
      case F.DATA:
        return this.data(flags, id, buf, start, end, now);
      case F.HEADERS:
        return this.headers(flags, id, buf, start, end, now);
      case F.CONTINUATION:
        return this.continuation(flags, id, buf, start, end, now);
      case F.SETTINGS:
        if (id !== 0) throw new ConnectionError(F.PROTOCOL_ERROR, "SETTINGS on a stream");
        if (flags & F.ACK) {
          if (end !== start) throw new ConnectionError(F.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload");
        } else {
          const delta = applySettings(this.peer, buf, start, end);
          this.peerMaxFrame = this.peer.maxFrame;
          if (delta !== 0) this.windowsMoved(delta);
          this.emit(F.SETTINGS_ACK);
        }
        if (this.ready) this.cheap(now);
        this.ready = true;
        return;
      case F.PING:
        if (id !== 0) throw new ConnectionError(F.PROTOCOL_ERROR, "PING on a stream");
        if (end - start !== 8) throw new ConnectionError(F.FRAME_SIZE_ERROR, "PING of other than 8 bytes");
        this.cheap(now);
        if ((flags & F.ACK) === 0) this.emit(F.frame(F.PING, F.ACK, 0, buf.subarray(start, end)));
        return;
      case F.WINDOW_UPDATE:
        return this.windowUpdate(id, buf, start, end);
      case F.RST_STREAM:
        return this.rstStream(id, start, end, now);
      case F.PRIORITY:
        if (id === 0) throw new ConnectionError(F.PROTOCOL_ERROR, "PRIORITY on stream 0");
        if (end - start !== 5) throw new ConnectionError(F.FRAME_SIZE_ERROR, "PRIORITY of other than 5 bytes");
        return this.cheap(now);
      case F.GOAWAY:
        if (id !== 0) throw new ConnectionError(F.PROTOCOL_ERROR, "GOAWAY on a stream");
        if (end - start < 8) throw new ConnectionError(F.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes");
        this.peerGoaway = true;
        return this.closeIfDone();
      case F.PUSH_PROMISE:
        throw new ConnectionError(F.PROTOCOL_ERROR, "PUSH_PROMISE from a client");
      default:
        // unknown frame types are ignored (RFC 9113 §5.5), and counted: they are free to send
        return this.cheap(now);
    }
  }

  private cheap(now: number): void {
    if (!this.cheapFrames.spend(now)) throw new ConnectionError(F.ENHANCE_YOUR_CALM, "frame flood");
  }

  private data(flags: number, id: number, buf: Buffer, start: number, end: number, now: number): void {
    if (id === 0) throw new ConnectionError(F.PROTOCOL_ERROR, "DATA on stream 0");
    if (id > this.lastStreamId) throw new ConnectionError(F.PROTOCOL_ERROR, "DATA on an idle stream");
    const length = end - start;
    // Every DATA byte counts against the connection window, whatever its stream's state.
    this.connectionRecvWindow -= length;
    if (this.connectionRecvWindow < 0) throw new ConnectionError(F.FLOW_CONTROL_ERROR, "DATA past the connection window");
    this.connectionUnacked += length;
    const endStream = (flags & F.END_STREAM) !== 0;
    if (length === 0 && !endStream) this.cheap(now);
    const stream = this.streams.get(id);
    if (stream === undefined || stream.remoteEnded) return; // closed or answered meanwhile: dropped
    if (flags & F.PADDED) {
      if (length === 0 || buf[start]! >= length) throw new ConnectionError(F.PROTOCOL_ERROR, "padding past the frame");
      end -= buf[start]!;
      start++;
    }
    stream.recvWindow -= length;
    if (stream.recvWindow < 0) return this.reset(stream, F.FLOW_CONTROL_ERROR);
    const bytes = end - start;
    const limits = this.limits;
    if (!stream.closed && bytes > 0) {
      if (stream.received + bytes > limits.maxBodyBytes || limits.pending.bytes + bytes > limits.pending.max) {
        // Past a bound: answered at once, what it holds let go, the rest of its body dropped.
        limits.pending.bytes -= stream.received;
        stream.chunks = undefined;
        stream.received = 0;
        stream.dispatched = true;
        this.handler(stream, true);
        if (!stream.closed) stream.close();
        return;
      }
      stream.received += bytes;
      limits.pending.bytes += bytes;
      (stream.chunks ??= []).push(buf.subarray(start, end));
    }
    if (endStream) return this.endOfRequest(stream);
    stream.recvUnacked += length;
    if (stream.recvUnacked >= STREAM_WINDOW / 2) {
      this.emit(F.windowUpdateFrame(id, stream.recvUnacked));
      stream.recvWindow += stream.recvUnacked;
      stream.recvUnacked = 0;
    }
  }

  private endOfRequest(stream: H2Stream): void {
    stream.remoteEnded = true;
    if (stream.closed || stream.dispatched) return this.finished(stream);
    const chunks = stream.chunks;
    stream.body = chunks === undefined ? stream.body : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, stream.received);
    this.limits.pending.bytes -= stream.received;
    stream.chunks = undefined;
    stream.dispatched = true;
    this.handler(stream, false);
  }

  private headers(flags: number, id: number, buf: Buffer, start: number, end: number, now: number): void {
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
    const part = buf.subarray(start, end);
    this.block = { streamId: id, endStream: (flags & F.END_STREAM) !== 0, parts: [part], bytes: part.length, frames: 1 };
    if (flags & F.END_HEADERS) this.headerBlock(now);
    else this.block.parts[0] = Buffer.from(part); // the read's buffer is not kept past it
  }

  private continuation(flags: number, id: number, buf: Buffer, start: number, end: number, now: number): void {
    const block = this.block;
    if (block === undefined || id !== block.streamId) throw new ConnectionError(F.PROTOCOL_ERROR, "CONTINUATION without its HEADERS");
    block.bytes += end - start;
    // Bounded in bytes and in frames before anything is kept (CVE-2024-27316).
    if (++block.frames > MAX_BLOCK_FRAMES || block.bytes > this.limits.maxHeaderListBytes * 2) {
      throw new ConnectionError(F.ENHANCE_YOUR_CALM, "header block too large");
    }
    block.parts.push(Buffer.from(buf.subarray(start, end)));
    if (flags & F.END_HEADERS) this.headerBlock(now);
  }

  /** A whole header block: decoded always (HPACK state), then a new stream, trailers, or nothing. */
  private headerBlock(now: number): void {
    const block = this.block!;
    this.block = undefined;
    const id = block.streamId;
    const bytes = block.parts.length === 1 ? block.parts[0]! : Buffer.concat(block.parts);
    const existing = this.streams.get(id);
    const isNew = id > this.lastStreamId;
    if (isNew && id % 2 === 0) throw new ConnectionError(F.PROTOCOL_ERROR, "even stream id from a client");
    const stream = isNew ? new H2Stream(this, id, this.peer.initialWindow, STREAM_WINDOW) : undefined;
    let listSize: number;
    try {
      listSize = this.hpack.decode(bytes, 0, bytes.length, stream === undefined ? ignoreField : (name, value) => takeField(stream, name, value));
    } catch (err) {
      if (err instanceof CompressionError) throw new ConnectionError(F.COMPRESSION_ERROR, err.message);
      throw err;
    }
    if (!isNew) {
      // Trailers of a request (must end it), or a block on a stream closed meanwhile: decoded, dropped.
      if (existing === undefined) return;
      if (!block.endStream) return this.reset(existing, F.PROTOCOL_ERROR);
      if (!existing.remoteEnded) this.endOfRequest(existing);
      return;
    }
    this.lastStreamId = id;
    const s = stream!;
    if (this.peerGoaway || this.goawayLastId >= 0) return this.cheap(now); // not served after GOAWAY
    if (this.streams.size >= this.limits.maxConcurrentStreams) {
      this.cheap(now);
      this.emit(F.rstStreamFrame(id, F.REFUSED_STREAM));
      return;
    }
    this.streams.set(id, s);
    this.lastActive = now;
    if (listSize > this.limits.maxHeaderListBytes) {
      s.status(431);
      return;
    }
    if (s.method === "" || s.path === "" || s.scheme === "") {
      this.reset(s, F.PROTOCOL_ERROR);
      return;
    }
    if (block.endStream) this.endOfRequest(s);
  }

  private windowUpdate(id: number, buf: Buffer, start: number, end: number): void {
    if (end - start !== 4) throw new ConnectionError(F.FRAME_SIZE_ERROR, "WINDOW_UPDATE of other than 4 bytes");
    const increment = buf.readUInt32BE(start) & 0x7fffffff;
    if (id === 0) {
      if (increment === 0) throw new ConnectionError(F.PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
      this.connectionWindow += increment;
      if (this.connectionWindow > F.MAX_WINDOW) throw new ConnectionError(F.FLOW_CONTROL_ERROR, "connection window past 2^31-1");
      return this.unblock();
    }
    if (id > this.lastStreamId) throw new ConnectionError(F.PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream");
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    if (increment === 0) return this.reset(stream, F.PROTOCOL_ERROR);
    stream.sendWindow += increment;
    if (stream.sendWindow > F.MAX_WINDOW) return this.reset(stream, F.FLOW_CONTROL_ERROR);
    if (this.blockedStreams.delete(stream)) stream.pump();
  }

  /** SETTINGS_INITIAL_WINDOW_SIZE changed: every open stream's window moves by the difference (RFC 9113 §6.9.2). */
  private windowsMoved(delta: number): void {
    for (const stream of this.streams.values()) {
      stream.sendWindow += delta;
      if (stream.sendWindow > F.MAX_WINDOW) throw new ConnectionError(F.FLOW_CONTROL_ERROR, "stream window past 2^31-1");
    }
    if (delta > 0) this.unblock();
  }

  private unblock(): void {
    for (const stream of [...this.blockedStreams]) {
      if (this.connectionWindow <= 0) return;
      this.blockedStreams.delete(stream);
      stream.pump();
    }
  }

  private rstStream(id: number, start: number, end: number, now: number): void {
    if (id === 0) throw new ConnectionError(F.PROTOCOL_ERROR, "RST_STREAM on stream 0");
    if (end - start !== 4) throw new ConnectionError(F.FRAME_SIZE_ERROR, "RST_STREAM of other than 4 bytes");
    if (id > this.lastStreamId) throw new ConnectionError(F.PROTOCOL_ERROR, "RST_STREAM on an idle stream");
    const stream = this.streams.get(id);
    // A reset before the answer is what rapid reset is made of: counted, in its own budget.
    if (stream === undefined) return this.cheap(now);
    if (!this.resets.spend(now)) throw new ConnectionError(F.ENHANCE_YOUR_CALM, "rapid reset");
    stream.remoteEnded = true;
    stream.close();
  }

  /** A stream error: RST_STREAM, the stream forgotten. */
  private reset(stream: H2Stream, code: number): void {
    if (!stream.closed) {
      stream.remoteEnded = true; // no RST_STREAM NO_ERROR from finished(): this one says it
      stream.close();
    }
    this.emit(F.rstStreamFrame(stream.id, code));
  }

  // --- StreamOwner ---

  finished(stream: H2Stream): void {
    if (!stream.closed) return; // the request ended; the answer is still to come
    if (this.streams.get(stream.id) !== stream) return;
    this.streams.delete(stream.id);
    this.blockedStreams.delete(stream);
    if (!stream.dispatched) {
      this.limits.pending.bytes -= stream.received;
      stream.received = 0;
      stream.chunks = undefined;
    }
    // Answered before the request ended: the client may stop sending (RFC 9113 §8.1).
    if (!stream.remoteEnded && !this.closed) this.emit(F.rstStreamFrame(stream.id, F.NO_ERROR));
    this.closeIfDone();
  }

  blocked(stream: H2Stream): void {
    this.blockedStreams.add(stream);
  }

  // --- the end ---

  /** GOAWAY: no stream above the last one seen is served; the connection closes when the others are answered. */
  goaway(code = F.NO_ERROR): void {
    if (this.closed) return;
    if (this.goawayLastId < 0 || code !== F.NO_ERROR) {
      this.goawayLastId = this.lastStreamId;
      this.emit(F.goawayFrame(this.lastStreamId, code));
    }
    this.closeIfDone();
  }

  private closeIfDone(): void {
    if (this.closed || this.streams.size > 0 || (!this.peerGoaway && this.goawayLastId < 0)) return;
    queueMicrotask(() => {
      if (this.closed || this.streams.size > 0) return;
      this.flush();
      this.socket.end();
      this.gone();
    });
  }

  /** The socket is gone or going: every stream closes (Watch streams unwatch). */
  gone(): void {
    if (this.closed) return;
    this.closed = true;
    for (const stream of [...this.streams.values()]) stream.close();
    this.streams.clear();
    this.blockedStreams.clear();
    if (this.rest !== undefined) this.rest = undefined;
    this.onClosed(this);
  }

  /** Ends the connection now (a timeout, a forced close). */
  destroy(): void {
    this.socket.destroy();
    this.gone();
  }
}

function ignoreField(): void {}

/** The request fields a call reads; pseudo-headers after a regular one make the request malformed. */
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
  }
}

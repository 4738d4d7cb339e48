import type { Socket } from "node:net";
import { FrameBudget } from "./budget.js";
import * as F from "./frames.js";
import { ConnectionError } from "./frames.js";
import { HeaderBlocks, type Block } from "./header-block.js";
import { addBody, releaseBody, takeBody, tooLarge } from "./body.js";
import { FrameOutput } from "./output.js";
import { applySettings, checkShape, EndedStreams, moveWindows, serverPreface, SkippedIds, type PeerSettings } from "./control.js";
import { H2Stream, type H2Limits, type StreamHandler, type StreamOwner } from "./stream.js";

/** the connection window we keep open for request bodies: topped up at half */
const CONNECTION_WINDOW = 1 << 20;
/** a stream's window is the default (we announce no SETTINGS_INITIAL_WINDOW_SIZE); topped up at half */
const STREAM_WINDOW = F.DEFAULT_WINDOW;
/** frames that cost work and carry no request: a burst, then per second (budget.ts) */
const CHEAP_FRAMES_BURST = 2000;
const CHEAP_FRAMES_PER_S = 1000;
/** streams reset by the client before their answer (CVE-2023-44487) */
const RESETS_BURST = 1000;
const RESETS_PER_S = 100;

/**
 * One HTTP/2 connection (RFC 9113), server side, built for unary gRPC: every read is parsed
 * whole, the answers it produces go into one buffer, and that buffer is one socket write.
 * Invariants: every header block passes through the one HPACK decoder in order, a refused
 * or reset stream's too; every DATA byte is counted against the connection window, whatever
 * its stream's state; the streams held never exceed maxConcurrentStreams.
 */
export class H2Connection implements StreamOwner {
  private readonly output: FrameOutput;
  peerMaxFrame = F.DEFAULT_MAX_FRAME;
  connectionWindow = F.DEFAULT_WINDOW;
  private readonly peer: PeerSettings = { initialWindow: F.DEFAULT_WINDOW, maxFrame: F.DEFAULT_MAX_FRAME };
  readonly streams = new Map<number, H2Stream>();
  private readonly blockedStreams = new Set<H2Stream>();
  private readonly ended = new EndedStreams();
  private readonly skipped = new SkippedIds();
  private readonly blocks: HeaderBlocks;
  private lastStreamId = 0;
  private prefaceLeft = F.PREFACE.length;
  /** the client's first SETTINGS arrived (the preface is complete) */
  ready = false;
  private rest: Buffer | undefined = undefined;
  private connectionRecvWindow = CONNECTION_WINDOW;
  private connectionUnacked = 0;
  private readonly cheapFrames: FrameBudget;
  private readonly resets: FrameBudget;
  /** GOAWAY sent: streams above this id are not served */
  private goawayLastId = -1;
  private peerGoaway = false;
  closed = false;
  /** ms since the epoch: the connection's start, its last stream, when reading stopped for the backlog (0: reading) */
  readonly openedAt: number;
  lastActive: number;

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
    this.output = new FrameOutput(socket);
    // compressed bytes of one block: twice the list bound leaves room for literals, not for floods
    this.blocks = new HeaderBlocks(limits.maxHeaderListBytes * 2);
    socket.setNoDelay(true);
    this.output.emit(serverPreface(limits, CONNECTION_WINDOW));
    this.flush();
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", () => {});
    socket.on("close", () => this.gone());
  }

  // --- output: one buffer per read, one write (output.ts) ---

  get out(): Buffer {
    return this.output.out;
  }

  reserve(n: number): number {
    return this.output.reserve(n);
  }

  private flush(): void {
    if (!this.closed) this.output.flush();
  }

  /** ms since the epoch when reading stopped for a write backlog; 0: reading */
  get pausedAt(): number {
    return this.output.pausedAt;
  }

  // --- input ---

  private onData(chunk: Buffer): void {
    if (this.closed) return;
    let buf = this.rest === undefined ? chunk : Buffer.concat([this.rest, chunk]);
    this.rest = undefined;
    this.output.inRead = true;
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
      this.output.inRead = false;
      this.flush();
      this.socket.end();
      this.gone();
      return;
    } finally {
      this.output.inRead = false;
    }
    if (this.connectionUnacked >= CONNECTION_WINDOW / 2) {
      this.output.emit(F.windowUpdateFrame(0, this.connectionUnacked));
      this.connectionRecvWindow += this.connectionUnacked;
      this.connectionUnacked = 0;
    }
    this.flush();
  }

  private frame(type: number, flags: number, id: number, buf: Buffer, start: number, end: number, now: number): void {
    if (this.blocks.pending && type !== F.CONTINUATION) throw new ConnectionError(F.PROTOCOL_ERROR, "header block interrupted");
    if (!this.ready && type !== F.SETTINGS) throw new ConnectionError(F.PROTOCOL_ERROR, "the preface's SETTINGS must come first");
    checkShape(type, flags, id, end - start);
    switch (type) {
      case F.DATA:
        return this.data(flags, id, buf, start, end, now);
      case F.HEADERS:
        return this.headerBlock(this.blocks.headers(flags, id, buf, start, end), now);
      case F.CONTINUATION:
        return this.headerBlock(this.blocks.continuation(flags, id, buf, start, end), now);
      case F.SETTINGS:
        if ((flags & F.ACK) === 0) {
          const delta = applySettings(this.peer, buf, start, end);
          this.peerMaxFrame = this.peer.maxFrame;
          if (delta !== 0) moveWindows(this.streams.values(), delta);
          // acknowledged before the DATA the new window lets out: the client reads them in that order
          this.output.emit(F.SETTINGS_ACK);
          if (delta > 0) this.unblock();
        }
        if (this.ready) this.cheap(now);
        this.ready = true;
        return;
      case F.PING:
        this.cheap(now);
        if ((flags & F.ACK) === 0) this.output.emit(F.frame(F.PING, F.ACK, 0, buf.subarray(start, end)));
        return;
      case F.WINDOW_UPDATE:
        return this.windowUpdate(id, buf, start);
      case F.RST_STREAM:
        return this.rstStream(id, now);
      case F.PRIORITY:
        this.cheap(now);
        // a stream may not depend on itself (RFC 9113 §5.3.1); an idle one cannot be reset: the connection ends
        if ((buf.readUInt32BE(start) & 0x7fffffff) !== id) return;
        if (id > this.lastStreamId) throw new ConnectionError(F.PROTOCOL_ERROR, "PRIORITY of an idle stream on itself");
        return this.streamError(id, F.PROTOCOL_ERROR);
      case F.GOAWAY:
        this.peerGoaway = true;
        return this.closeIfDone();
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
    if (stream === undefined || stream.remoteEnded) {
      // after the client's own end: its error; after ours (answered, reset), in flight: dropped
      if (stream?.clientEnded ?? this.ended.has(id)) this.streamError(id, F.STREAM_CLOSED, now);
      return;
    }
    if (flags & F.PADDED) {
      if (length === 0 || buf[start]! >= length) throw new ConnectionError(F.PROTOCOL_ERROR, "padding past the frame");
      end -= buf[start]!;
      start++;
    }
    if (stream.contentLeft >= 0 && (stream.contentLeft -= end - start) < 0) return this.reset(stream, F.PROTOCOL_ERROR);
    stream.recvWindow -= length;
    if (stream.recvWindow < 0) return this.reset(stream, F.FLOW_CONTROL_ERROR);
    if (!stream.closed && end > start && !addBody(stream, this.limits, buf, start, end, endStream)) return tooLarge(stream, this.limits, this.handler);
    if (endStream) return this.endOfRequest(stream);
    stream.recvUnacked += length;
    if (stream.recvUnacked >= STREAM_WINDOW / 2) {
      this.output.emit(F.windowUpdateFrame(id, stream.recvUnacked));
      stream.recvWindow += stream.recvUnacked;
      stream.recvUnacked = 0;
    }
  }

  private endOfRequest(stream: H2Stream): void {
    stream.remoteEnded = stream.clientEnded = true;
    if (stream.closed || stream.dispatched) return this.finished(stream);
    if (stream.contentLeft > 0) return this.reset(stream, F.PROTOCOL_ERROR); // shorter than its content-length
    stream.body = takeBody(stream, this.limits) ?? stream.body;
    stream.dispatched = true;
    this.handler.complete(stream, false);
  }

  /** A whole header block: decoded always (HPACK state), then a new stream, trailers, or nothing. */
  private headerBlock(block: Block | undefined, now: number): void {
    if (block === undefined) return;
    const id = block.streamId;
    const existing = this.streams.get(id);
    const isNew = id > this.lastStreamId;
    if (isNew && id % 2 === 0) throw new ConnectionError(F.PROTOCOL_ERROR, "even stream id from a client");
    const stream = isNew ? new H2Stream(this, id, this.peer.initialWindow, STREAM_WINDOW) : undefined;
    const listSize = this.blocks.decode(block, stream);
    if (!isNew) {
      // Trailers of a request (must end it), or a block on a stream closed meanwhile: decoded, dropped
      // unless the client had ended that stream itself.
      if (existing?.clientEnded) return this.streamError(id, F.STREAM_CLOSED, now);
      if (existing === undefined) {
        if (this.ended.has(id)) throw new ConnectionError(F.STREAM_CLOSED, "HEADERS on a stream the client closed");
        if (this.skipped.has(id)) throw new ConnectionError(F.PROTOCOL_ERROR, "HEADERS on a stream id below one already used");
        return;
      }
      if (!block.endStream) return this.reset(existing, F.PROTOCOL_ERROR);
      if (!existing.remoteEnded) this.endOfRequest(existing);
      return;
    }
    this.skipped.opened(this.lastStreamId, id);
    this.lastStreamId = id;
    const s = stream!;
    if (this.peerGoaway || this.goawayLastId >= 0) return this.cheap(now); // not served after GOAWAY
    if (this.streams.size >= this.limits.maxConcurrentStreams) {
      this.cheap(now);
      this.output.emit(F.rstStreamFrame(id, F.REFUSED_STREAM));
      return;
    }
    this.streams.set(id, s);
    this.lastActive = now;
    if (listSize > this.limits.maxHeaderListBytes) {
      s.status(431);
      return;
    }
    if (s.malformed || block.selfDependent || s.method === "" || s.path === "" || s.scheme === "") {
      this.reset(s, F.PROTOCOL_ERROR);
      return;
    }
    s.maxBody = this.limits.maxBodyBytes;
    this.handler.opened(s, now);
    if (s.closed) return;
    if (block.endStream) this.endOfRequest(s);
  }

  private windowUpdate(id: number, buf: Buffer, start: number): void {
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

  private unblock(): void {
    for (const stream of [...this.blockedStreams]) {
      if (this.connectionWindow <= 0) return;
      this.blockedStreams.delete(stream);
      stream.pump();
    }
  }

  private rstStream(id: number, now: number): void {
    if (id > this.lastStreamId) throw new ConnectionError(F.PROTOCOL_ERROR, "RST_STREAM on an idle stream");
    const stream = this.streams.get(id);
    // A reset before the answer is what rapid reset is made of: counted, in its own budget.
    if (stream === undefined) return this.cheap(now);
    if (!this.resets.spend(now)) throw new ConnectionError(F.ENHANCE_YOUR_CALM, "rapid reset");
    stream.remoteEnded = stream.clientEnded = true;
    stream.close();
  }

  /** A stream error: RST_STREAM, the stream forgotten. */
  private reset(stream: H2Stream, code: number): void {
    if (!stream.closed) {
      stream.remoteEnded = true; // no RST_STREAM NO_ERROR from finished(): this one says it
      stream.close();
    }
    this.output.emit(F.rstStreamFrame(stream.id, code));
  }

  /** A stream error on `id`, open or closed; counted when it answers a frame on a closed stream (`now`). */
  private streamError(id: number, code: number, now?: number): void {
    if (now !== undefined) this.cheap(now);
    const stream = this.streams.get(id);
    if (stream !== undefined) return this.reset(stream, code);
    this.output.emit(F.rstStreamFrame(id, code));
  }

  // --- StreamOwner ---

  finished(stream: H2Stream): void {
    if (!stream.closed) return; // the request ended; the answer is still to come
    if (this.streams.get(stream.id) !== stream) return;
    this.streams.delete(stream.id);
    this.blockedStreams.delete(stream);
    if (!stream.dispatched) releaseBody(stream, this.limits);
    if (stream.clientEnded) this.ended.add(stream.id);
    // Answered before the request ended: the client may stop sending (RFC 9113 §8.1).
    if (!stream.remoteEnded && !this.closed) this.output.emit(F.rstStreamFrame(stream.id, F.NO_ERROR));
    this.closeIfDone();
  }

  cancel(stream: H2Stream): void {
    this.reset(stream, F.CANCEL);
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
      this.output.emit(F.goawayFrame(this.lastStreamId, code));
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
    this.rest = undefined;
    this.onClosed(this);
  }

  /** Ends the connection now (a timeout, a forced close). */
  destroy(): void {
    this.socket.destroy();
    this.gone();
  }
}

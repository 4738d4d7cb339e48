import { DATA, END_HEADERS, END_STREAM, FRAME_HEADER, HEADERS, writeFrameHeader } from "./frames.js";
import { errorBlock, GRPC_HEADERS, GRPC_OK_TRAILERS, statusBlock } from "./response-blocks.js";

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

/** What serves the streams: told when one opens (its headers are in) and when its request is complete. */
export interface StreamHandler {
  /** may set the stream's maxBody and deadline, or answer it at once */
  opened(stream: H2Stream, now: number): void;
  /** the body is whole in `stream.body`, or `tooLarge`: past maxBody or the node's pending bytes */
  complete(stream: H2Stream, tooLarge: boolean): void;
  /** the stream is still open at its deadlineAt */
  expired(stream: H2Stream): void;
}

/** What a stream needs of its connection to send. */
export interface StreamOwner {
  /** `n` bytes at the returned offset of `out` are this stream's to fill, in order */
  reserve(n: number): number;
  readonly out: Buffer;
  /** the client's SETTINGS_MAX_FRAME_SIZE */
  readonly peerMaxFrame: number;
  /** the connection's send window (the client's), shared by every stream */
  connectionWindow: number;
  /** the stream sent its END_STREAM (or was reset): the connection forgets it */
  finished(stream: H2Stream): void;
  /** resets the stream (CANCEL) */
  cancel(stream: H2Stream): void;
  /** the stream has DATA waiting for a WINDOW_UPDATE */
  blocked(stream: H2Stream): void;
}

/**
 * One request stream: its request (the fields a gRPC call needs; every other header is
 * decoded, counted and dropped) and the ways to answer it. The answer methods are the whole
 * of what the gRPC layer sees of HTTP/2; each is a no-op once the stream is closed (the
 * client reset it, or the answer is complete). DATA honours the client's windows: what does
 * not fit waits in `queued` for a WINDOW_UPDATE, the trailers behind it.
 */
export class H2Stream {
  method = "";
  path = "";
  scheme = "";
  contentType = "";
  authorization = "";
  grpcTimeout = "";
  grpcEncoding = "";
  /** the request broke HTTP/2's rules for fields (header-block.ts): a stream error */
  malformed = false;
  /** which pseudo-headers came, and whether a regular field did (header-block.ts) */
  fieldsSeen = 0;
  /** content-length less the DATA bytes so far; -1: none given */
  contentLeft = -1;
  /** the handler's own, for its stream (what its headers decided, for the message) */
  tag: unknown = undefined;
  /** the request body, whole, when the call is dispatched */
  body: Buffer = EMPTY;
  /** no more is sent on this stream */
  closed = false;
  /** called once when the stream closes (answered, reset by the client, connection gone) */
  onClose: (() => void) | undefined = undefined;
  /** ms since the epoch by which the call must be answered (grpc-timeout); 0: none */
  deadlineAt = 0;
  /** the request body's bound (the gRPC message's, with its 5-byte head) */
  maxBody = 0;
  /** the gRPC message head (declared length) was looked at */
  headSeen = false;

  // --- the connection's bookkeeping ---
  /** no more of the request is read: the client's END_STREAM or RST_STREAM came, or we reset the stream */
  remoteEnded = false;
  /** the client ended its side (END_STREAM or RST_STREAM): a DATA or HEADERS after that is its error */
  clientEnded = false;
  /** the request went to the handler */
  dispatched = false;
  headersSent = false;
  /** body bytes so far, and the chunks holding them */
  received = 0;
  chunks: Buffer[] | undefined = undefined;
  /** request bytes consumed since the last stream WINDOW_UPDATE, and what the client may still send */
  recvUnacked = 0;
  recvWindow: number;
  /** what we may still send (the client's window for this stream) */
  sendWindow: number;
  /** DATA payload waiting for the client's windows, then the trailers (or not) */
  private queued: Buffer | undefined = undefined;
  private trailersAfter = false;
  /** the last queued DATA frame carries END_STREAM (a plain HTTP answer: no trailers) */
  private endWithData = false;

  constructor(
    /** the connection: streams of one connection share it */
    readonly owner: StreamOwner,
    readonly id: number,
    sendWindow: number,
    recvWindow: number,
  ) {
    this.sendWindow = sendWindow;
    this.recvWindow = recvWindow;
  }

  /** The unary answer: HEADERS, one gRPC message, `grpc-status: 0` trailers; in one write when the windows allow. */
  reply(message: Buffer): void {
    if (this.closed || this.headersSent) return;
    const payload = 5 + message.length;
    if (payload > this.sendWindow || payload > this.owner.connectionWindow || payload > this.owner.peerMaxFrame) {
      this.open();
      this.send(message);
      return this.end();
    }
    this.headersSent = true;
    this.sendWindow -= payload;
    this.owner.connectionWindow -= payload;
    const h = GRPC_HEADERS.length;
    const t = GRPC_OK_TRAILERS.length;
    let at = this.owner.reserve(FRAME_HEADER * 3 + h + payload + t);
    const buf = this.owner.out;
    writeFrameHeader(buf, at, h, HEADERS, END_HEADERS, this.id);
    GRPC_HEADERS.copy(buf, at + FRAME_HEADER);
    at += FRAME_HEADER + h;
    writeFrameHeader(buf, at, payload, DATA, 0, this.id);
    buf[at + FRAME_HEADER] = 0;
    buf.writeUInt32BE(message.length, at + FRAME_HEADER + 1);
    message.copy(buf, at + FRAME_HEADER + 5);
    at += FRAME_HEADER + payload;
    writeFrameHeader(buf, at, t, HEADERS, END_HEADERS | END_STREAM, this.id);
    GRPC_OK_TRAILERS.copy(buf, at + FRAME_HEADER);
    this.close();
  }

  /** A trailers-only gRPC error. */
  fail(code: number, message: string): void {
    if (this.closed || this.headersSent) return;
    this.headers(errorBlock(code, message), true);
    this.close();
  }

  /** A plain HTTP answer (not a gRPC request), with a short text body or none; the body honours the windows. */
  status(code: number, text?: Buffer): void {
    if (this.closed || this.headersSent) return;
    this.headers(statusBlock(code, text !== undefined), text === undefined);
    if (text === undefined) return this.close();
    this.queued = text;
    this.endWithData = true;
    this.pump();
  }

  /** The response headers of a streaming answer (Watch); messages follow with send(). */
  open(): void {
    if (this.closed || this.headersSent) return;
    this.headers(GRPC_HEADERS, false);
  }

  /** One gRPC message on an open answer. */
  send(message: Buffer): void {
    if (this.closed || !this.headersSent || this.trailersAfter) return;
    const framed = Buffer.allocUnsafe(5 + message.length);
    framed[0] = 0;
    framed.writeUInt32BE(message.length, 1);
    message.copy(framed, 5);
    this.queued = this.queued === undefined ? framed : Buffer.concat([this.queued, framed]);
    this.pump();
  }

  /** `grpc-status: 0` trailers, after whatever DATA waits. */
  end(): void {
    if (this.closed || !this.headersSent || this.trailersAfter) return;
    this.trailersAfter = true;
    this.pump();
  }

  /** Bytes waiting for the client's windows. */
  get queuedBytes(): number {
    return this.queued?.length ?? 0;
  }

  /** Sends what the windows allow of the queued DATA, then the trailers once nothing waits. */
  pump(): void {
    const owner = this.owner;
    while (this.queued !== undefined) {
      const n = Math.min(this.queued.length, this.sendWindow, owner.connectionWindow, owner.peerMaxFrame);
      if (n <= 0) return owner.blocked(this);
      const at = owner.reserve(FRAME_HEADER + n);
      writeFrameHeader(owner.out, at, n, DATA, this.endWithData && n === this.queued.length ? END_STREAM : 0, this.id);
      this.queued.copy(owner.out, at + FRAME_HEADER, 0, n);
      this.sendWindow -= n;
      owner.connectionWindow -= n;
      this.queued = n === this.queued.length ? undefined : this.queued.subarray(n);
    }
    if (this.endWithData) this.close();
    else if (this.trailersAfter) {
      this.headers(GRPC_OK_TRAILERS, true);
      this.close();
    }
  }

  private headers(block: Buffer, endStream: boolean): void {
    this.headersSent = true;
    const at = this.owner.reserve(FRAME_HEADER + block.length);
    writeFrameHeader(this.owner.out, at, block.length, HEADERS, END_HEADERS | (endStream ? END_STREAM : 0), this.id);
    block.copy(this.owner.out, at + FRAME_HEADER);
  }

  /** Ends an answer that cannot complete (its DATA held by the client's windows past the deadline): RST_STREAM CANCEL. */
  cancel(): void {
    if (!this.closed) this.owner.cancel(this);
  }

  /** The stream is done for the sender (END_STREAM sent, a reset either way, the connection gone). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queued = undefined;
    this.owner.finished(this);
    const onClose = this.onClose;
    this.onClose = undefined;
    onClose?.();
  }
}

const EMPTY = Buffer.alloc(0);

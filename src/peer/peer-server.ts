// The listening end of the peer channel: authenticates each connection with
// the HMAC handshake, then decides DECIDE batches with the local handler and
// answers PING and CALL.

import type net from "node:net";
import { performance } from "node:perf_hooks";
import { CallStatus, DecideCode, FrameType, MAX_CALL_ERROR_BYTES, MAX_FRAME_BYTES, MAX_HANDSHAKE_FRAME_BYTES, PEER_DEFAULTS } from "./constants.js";
import { FrameError } from "./errors.js";
import { FrameDecoder } from "./frame.js";
import { ServerHandshake, secretKey } from "./handshake.js";
import { NOOP_LOGGER, type PeerLogger } from "./logger.js";
import { DecideBatchReader, DecideReplyWriter, decodeCall, decodePing, encodeCallReply, encodePing, type DecideResult } from "./messages.js";
import { createListener, type PeerSocket, type PeerTlsOptions } from "./transport.js";
import type { KeyObject } from "node:crypto";

export interface PeerServerHandler {
  /**
   * Decide one forwarded request locally (a forwarded request is never
   * forwarded again). Synchronous; write the answer into `out`, an object
   * reused for every item. A throw answers this item with code 2 (error)
   * and leaves its neighbours alone.
   */
  decide(ns: string, identifier: string, algorithm: number, limit: number, duration: number, out: DecideResult): void;
  /**
   * Cold path (state hand-off, leave notices): an opaque request answered
   * with an opaque reply. A rejection reaches the caller as a 'remote'
   * PeerError carrying the message.
   */
  call?(method: number, payload: Buffer, fromNodeId: string): Promise<Buffer>;
  /**
   * A peer proved knowledge of the secret on a new connection: it is alive now. The
   * cluster uses this to reconnect to it without waiting out a reconnect backoff.
   */
  onPeerAuthenticated?(nodeId: string): void;
}

export interface PeerServerOptions {
  host: string;
  /** 0 picks a free port; listen() resolves with the one chosen. */
  port: number;
  /** CLUSTER_SECRET. */
  secret: string;
  /** This node's id, sent to clients in CHALLENGE. */
  nodeId: string;
  handler: PeerServerHandler;
  tls?: PeerTlsOptions;
  /** ms a new connection has to complete the handshake; default 10 000. */
  handshakeTimeoutMs?: number;
  /** ms of silence after which an authenticated connection is closed; default 5 000. */
  idleTimeoutMs?: number;
  /** Unauthenticated connections beyond this are dropped at accept; default 256. */
  maxPendingHandshakes?: number;
  logger?: PeerLogger;
}

/** Counters for metrics and tests. */
export interface PeerServerStats {
  /** Frames received on authenticated connections. */
  framesReceived: number;
  decideFrames: number;
  decideItems: number;
  /** Items whose handler threw (answered with code 2). */
  decideErrors: number;
  calls: number;
  handshakesCompleted: number;
  /** Connections closed for a failed or late handshake, bad frames, or idleness. */
  connectionsRejected: number;
}

export class PeerServer {
  readonly stats: PeerServerStats = {
    framesReceived: 0,
    decideFrames: 0,
    decideItems: 0,
    decideErrors: 0,
    calls: 0,
    handshakesCompleted: 0,
    connectionsRejected: 0,
  };
  /** @internal shared by connections */
  readonly key: KeyObject;
  /** @internal */
  readonly opts: Required<Omit<PeerServerOptions, "tls" | "logger" | "secret">>;
  /** @internal */
  readonly log: PeerLogger;
  /** @internal */
  readonly conns = new Set<InboundConnection>();
  /** @internal */
  pendingHandshakes = 0;
  // One reader and one result object serve every connection: decisions are
  // synchronous, so they are never used by two frames at once.
  /** @internal */
  readonly reader = new DecideBatchReader();
  /** @internal */
  readonly replies = new DecideReplyWriter();
  /** @internal */
  readonly out: DecideResult = { code: 0, remaining: 0, resetTime: 0, retryAfterMs: 0 };
  private readonly server: net.Server;
  private listening = false;

  constructor(opts: PeerServerOptions) {
    this.key = secretKey(opts.secret);
    this.log = opts.logger ?? NOOP_LOGGER;
    this.opts = {
      host: opts.host,
      port: opts.port,
      nodeId: opts.nodeId,
      handler: opts.handler,
      handshakeTimeoutMs: opts.handshakeTimeoutMs ?? PEER_DEFAULTS.handshakeTimeoutMs,
      idleTimeoutMs: opts.idleTimeoutMs ?? PEER_DEFAULTS.idleTimeoutMs,
      maxPendingHandshakes: opts.maxPendingHandshakes ?? PEER_DEFAULTS.maxPendingHandshakes,
    };
    this.server = createListener(opts.tls, this.opts.handshakeTimeoutMs, (socket) => this.accept(socket));
  }

  /** Open connections, authenticated or not. */
  get connections(): number {
    return this.conns.size;
  }

  /** Start listening; resolves with the bound port. */
  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.server.once("error", onError);
      this.server.listen(this.opts.port, this.opts.host, () => {
        this.server.off("error", onError);
        this.server.on("error", (err) => this.log.warn({ err }, "peer listener error"));
        this.listening = true;
        resolve(this.port);
      });
    });
  }

  get port(): number {
    const addr = this.server.address();
    return addr !== null && typeof addr === "object" ? addr.port : 0;
  }

  /** Stop accepting, drop every connection, resolve when the listener is closed. */
  close(): Promise<void> {
    for (const c of [...this.conns]) c.close();
    if (!this.listening) return Promise.resolve();
    this.listening = false;
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(socket: PeerSocket): void {
    if (this.pendingHandshakes >= this.opts.maxPendingHandshakes) {
      this.stats.connectionsRejected++;
      this.log.warn({ remote: socket.remoteAddress }, "peer connection dropped: too many pending handshakes");
      socket.destroy();
      return;
    }
    this.conns.add(new InboundConnection(this, socket));
  }
}

const enum Phase {
  HANDSHAKE,
  READY,
  CLOSED,
}

/** One accepted connection. */
class InboundConnection {
  private phase = Phase.HANDSHAKE;
  private handshake: ServerHandshake | null;
  private readonly decoder: FrameDecoder;
  private timer: NodeJS.Timeout;
  private lastRx = performance.now();
  private remoteNodeId = "";

  constructor(
    private readonly server: PeerServer,
    private readonly socket: PeerSocket,
  ) {
    server.pendingHandshakes++;
    this.handshake = new ServerHandshake(server.key, server.opts.nodeId);
    this.decoder = new FrameDecoder((type, body) => this.onFrame(type, body), MAX_HANDSHAKE_FRAME_BYTES);
    this.timer = setTimeout(() => this.reject("handshake timeout"), server.opts.handshakeTimeoutMs);
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", (err) => server.log.debug({ err, remote: socket.remoteAddress }, "peer socket error"));
    socket.on("close", () => this.close());
  }

  private onData(chunk: Buffer): void {
    // One clock read per chunk (not per frame) feeds the idle check.
    this.lastRx = performance.now();
    // Replies to every frame of this chunk leave in one write.
    this.socket.cork();
    try {
      this.decoder.push(chunk);
    } catch (err) {
      this.reject(err instanceof Error ? err.message : String(err));
    } finally {
      this.socket.uncork();
    }
  }

  private onFrame(type: number, body: Buffer): void {
    if (this.phase !== Phase.READY) {
      if (this.phase === Phase.HANDSHAKE) this.onHandshakeFrame(type, body);
      return;
    }
    const stats = this.server.stats;
    stats.framesReceived++;
    switch (type) {
      case FrameType.DECIDE:
        this.onDecide(body);
        return;
      case FrameType.PING:
        this.socket.write(encodePing(FrameType.PONG, decodePing(body)));
        return;
      case FrameType.CALL:
        this.onCall(body);
        return;
      default:
        throw new FrameError(`frame type ${type} not accepted by a peer server`);
    }
  }

  private onHandshakeFrame(type: number, body: Buffer): void {
    // Throws on anything but the next expected handshake frame; onData closes.
    const done = this.handshake!.receive(type, body, (frame) => this.socket.write(frame));
    if (!done) return;
    this.remoteNodeId = this.handshake!.remoteNodeId;
    this.handshake = null;
    this.phase = Phase.READY;
    this.server.pendingHandshakes--;
    this.server.stats.handshakesCompleted++;
    this.decoder.maxFrameBytes = MAX_FRAME_BYTES;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.checkIdle(), this.server.opts.idleTimeoutMs);
    this.server.log.debug({ peer: this.remoteNodeId }, "peer connection authenticated");
    try {
      this.server.opts.handler.onPeerAuthenticated?.(this.remoteNodeId);
    } catch (err) {
      this.server.log.warn({ err: (err as Error).message }, "onPeerAuthenticated failed");
    }
  }

  private onDecide(body: Buffer): void {
    const server = this.server;
    const { reader, replies, out, stats } = server;
    const handler = server.opts.handler;
    // Validates the whole frame first: a bad item anywhere throws before any item is decided.
    reader.decode(body);
    const n = reader.count;
    stats.decideFrames++;
    stats.decideItems += n;
    const { reqIds, algorithms, limits, durations, namespaces, identifiers } = reader;
    replies.begin(n);
    for (let i = 0; i < n; i++) {
      out.code = DecideCode.ERROR;
      out.remaining = 0;
      out.resetTime = 0;
      out.retryAfterMs = 0;
      let code: number;
      try {
        handler.decide(namespaces[i]!, identifiers[i]!, algorithms[i]!, limits[i]!, durations[i]!, out);
        code = out.code === DecideCode.ALLOWED || out.code === DecideCode.BLOCKED ? out.code : DecideCode.ERROR;
      } catch (err) {
        stats.decideErrors++;
        // Logged at debug only: a broken handler would otherwise log at request rate.
        server.log.debug({ err, ns: namespaces[i] }, "peer decide handler threw");
        replies.put(reqIds[i]!, DecideCode.ERROR, 0, 0, 0);
        continue;
      }
      replies.put(reqIds[i]!, code, out.remaining, out.resetTime, out.retryAfterMs);
    }
    this.socket.write(replies.finish());
  }

  private onCall(body: Buffer): void {
    const { callId, method, payload } = decodeCall(body);
    const server = this.server;
    server.stats.calls++;
    const handler = server.opts.handler;
    const answer =
      handler.call === undefined
        ? Promise.reject(new Error(`no call handler for method ${method}`))
        : Promise.resolve().then(() => handler.call!(method, payload, this.remoteNodeId));
    answer
      .then(
        (reply) => {
          if (this.phase !== Phase.READY) return;
          if (!Buffer.isBuffer(reply)) throw new TypeError("call handler must resolve to a Buffer");
          this.socket.write(encodeCallReply(callId, CallStatus.OK, reply));
        },
        (err: unknown) => this.replyCallError(callId, err),
      )
      .catch((err: unknown) => this.replyCallError(callId, err));
  }

  private replyCallError(callId: number, err: unknown): void {
    if (this.phase !== Phase.READY) return;
    let msg = Buffer.from(err instanceof Error ? err.message : String(err), "utf8");
    if (msg.length > MAX_CALL_ERROR_BYTES) msg = msg.subarray(0, MAX_CALL_ERROR_BYTES);
    this.socket.write(encodeCallReply(callId, CallStatus.ERROR, msg));
  }

  private checkIdle(): void {
    const idle = this.server.opts.idleTimeoutMs;
    const silent = performance.now() - this.lastRx;
    // setTimeout may fire a fraction of a millisecond early by this clock.
    if (silent >= idle - 1) {
      this.reject("idle timeout");
      return;
    }
    this.timer = setTimeout(() => this.checkIdle(), idle - silent);
  }

  /** Close for cause: counted, and logged (quietly, strangers may probe the port). */
  private reject(reason: string): void {
    if (this.phase === Phase.CLOSED) return;
    this.server.stats.connectionsRejected++;
    this.server.log.debug({ reason, peer: this.remoteNodeId || undefined, remote: this.socket.remoteAddress }, "peer connection closed");
    this.close();
  }

  close(): void {
    if (this.phase === Phase.CLOSED) return;
    if (this.phase === Phase.HANDSHAKE) this.server.pendingHandshakes--;
    this.phase = Phase.CLOSED;
    this.handshake = null;
    this.decoder.stop();
    clearTimeout(this.timer);
    this.socket.destroy();
    this.server.conns.delete(this);
  }
}

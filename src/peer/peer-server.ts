// The listening end of the peer channel: authenticates each connection with
// the handshake, checks the tag of every frame after it, decides DECIDE
// batches with the local handler and answers PING and CALL.
//
// Unauthenticated connections are bounded overall and per source address.
// When a bound is reached the OLDEST unauthenticated connection is closed
// (one that has sent nothing first), never the new one: a flood of idle
// connections cannot keep a restarting member out, since the member's
// connection completes its handshake in one round trip, long before the
// flood could push it out of the queue.

import type net from "node:net";
import { performance } from "node:perf_hooks";
import { CallStatus, DecideCode, FrameType, MAX_CALL_ERROR_BYTES, MAX_FRAME_BYTES, MAX_HANDSHAKE_FRAME_BYTES, PEER_DEFAULTS } from "./constants.js";
import { FrameAuthError, FrameError } from "./errors.js";
import { FrameDecoder } from "./frame.js";
import { HandshakeError, ServerHandshake, readyFrame, secretKey } from "./handshake.js";
import { NOOP_LOGGER, type PeerLogger } from "./logger.js";
import { DecideBatchReader, DecideReplyWriter, decodeCall, decodePing, encodeCallReply, encodePing, type DecideResult } from "./messages.js";
import { RefusalLog } from "./refusal-log.js";
import type { FrameSealer } from "./session.js";
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
  /** This node's id: clients must name it in HELLO (see PeerServer.nodeId to change it). */
  nodeId: string;
  handler: PeerServerHandler;
  tls?: PeerTlsOptions;
  /** ms a new connection has to complete the handshake; default 2 000. */
  handshakeTimeoutMs?: number;
  /** ms of silence after which an authenticated connection is closed; default 5 000. */
  idleTimeoutMs?: number;
  /** Unauthenticated connections held at once; beyond it the oldest is closed. Default 256. */
  maxPendingHandshakes?: number;
  /** The same from one source address; default 16. */
  maxPendingPerSource?: number;
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
  /** Frames whose tag did not verify (each closed its connection). */
  framesRefused: number;
  /** Unauthenticated connections closed to make room for a newer one. */
  pendingEvicted: number;
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
    framesRefused: 0,
    pendingEvicted: 0,
  };
  /**
   * This node's id. A HELLO naming another id is refused. Assignable: a node learns its
   * name in the member list only once the list is known.
   */
  nodeId: string;
  /** Refusals by reason, logged as a periodic summary. */
  readonly refusals: RefusalLog;
  /** @internal shared by connections */
  readonly key: KeyObject;
  /** @internal */
  readonly opts: Required<Omit<PeerServerOptions, "tls" | "logger" | "secret" | "nodeId">>;
  /** @internal */
  readonly log: PeerLogger;
  /** @internal */
  readonly conns = new Set<InboundConnection>();
  /** @internal unauthenticated connections, oldest first */
  readonly pending = new Set<InboundConnection>();
  /** @internal unauthenticated connections per source address */
  readonly pendingBySource = new Map<string, number>();
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
    this.refusals = new RefusalLog(this.log);
    this.nodeId = opts.nodeId;
    this.opts = {
      host: opts.host,
      port: opts.port,
      handler: opts.handler,
      handshakeTimeoutMs: opts.handshakeTimeoutMs ?? PEER_DEFAULTS.handshakeTimeoutMs,
      idleTimeoutMs: opts.idleTimeoutMs ?? PEER_DEFAULTS.idleTimeoutMs,
      maxPendingHandshakes: opts.maxPendingHandshakes ?? PEER_DEFAULTS.maxPendingHandshakes,
      maxPendingPerSource: opts.maxPendingPerSource ?? PEER_DEFAULTS.maxPendingPerSource,
    };
    this.server = createListener(opts.tls, this.opts.handshakeTimeoutMs, (socket) => this.accept(socket));
  }

  /** Open connections, authenticated or not. */
  get connections(): number {
    return this.conns.size;
  }

  /** Open connections that have not completed the handshake. */
  get pendingHandshakes(): number {
    return this.pending.size;
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
    this.refusals.stop();
    if (!this.listening) return Promise.resolve();
    this.listening = false;
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(socket: PeerSocket): void {
    const source = socket.remoteAddress ?? "";
    if ((this.pendingBySource.get(source) ?? 0) >= this.opts.maxPendingPerSource) this.evictOldest(source);
    else if (this.pending.size >= this.opts.maxPendingHandshakes) this.evictOldest(undefined);
    this.conns.add(new InboundConnection(this, socket, source));
  }

  /**
   * Close the oldest unauthenticated connection (of `source`, when given), preferring
   * one that has sent nothing: a member's connection sends HELLO as soon as it opens.
   * Runs only at a bound, over at most maxPendingHandshakes connections.
   */
  private evictOldest(source: string | undefined): void {
    let oldest: InboundConnection | undefined;
    for (const c of this.pending) {
      if (source !== undefined && c.source !== source) continue;
      if (!c.heardFrom) {
        oldest = c;
        break;
      }
      oldest ??= c;
    }
    if (oldest === undefined) return;
    this.stats.pendingEvicted++;
    oldest.reject("evicted", "unauthenticated connection evicted for a newer one");
  }
}

const enum Phase {
  HANDSHAKE,
  READY,
  CLOSED,
}

/** One accepted connection. */
class InboundConnection {
  /** Whether any byte has arrived (evictions take silent connections first). */
  heardFrom = false;
  private phase = Phase.HANDSHAKE;
  private handshake: ServerHandshake | null;
  private sealer: FrameSealer | null = null;
  private readonly decoder: FrameDecoder;
  private timer: NodeJS.Timeout;
  private lastRx = performance.now();
  private remoteNodeId = "";

  constructor(
    private readonly server: PeerServer,
    private readonly socket: PeerSocket,
    readonly source: string,
  ) {
    server.pending.add(this);
    server.pendingBySource.set(source, (server.pendingBySource.get(source) ?? 0) + 1);
    this.handshake = new ServerHandshake(server.key, server.nodeId);
    this.decoder = new FrameDecoder((type, body) => this.onFrame(type, body), MAX_HANDSHAKE_FRAME_BYTES);
    this.timer = setTimeout(() => this.reject("timeout", "handshake timeout"), server.opts.handshakeTimeoutMs);
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", (err) => server.log.debug({ err, remote: socket.remoteAddress }, "peer socket error"));
    socket.on("close", () => this.close());
  }

  private onData(chunk: Buffer): void {
    // One clock read per chunk (not per frame) feeds the idle check.
    this.lastRx = performance.now();
    this.heardFrom = true;
    // Replies to every frame of this chunk leave in one write.
    this.socket.cork();
    try {
      this.decoder.push(chunk);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (err instanceof FrameAuthError) {
        this.server.stats.framesRefused++;
        this.reject("bad_tag", message);
      } else if (err instanceof HandshakeError) {
        this.reject(err.reason, message);
      } else {
        this.reject(this.phase === Phase.HANDSHAKE ? "malformed" : "bad_frame", message);
      }
    } finally {
      this.socket.uncork();
    }
  }

  /** Seal and write frames (whole frames, each with room for its tag). */
  private send(frames: Buffer): void {
    this.socket.write(this.sealer!.seal(frames));
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
        this.send(encodePing(FrameType.PONG, decodePing(body)));
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
    const handshake = this.handshake!;
    const done = handshake.receive(type, body, (frame) => this.socket.write(frame));
    if (!done) return;
    this.remoteNodeId = handshake.remoteNodeId;
    this.handshake = null;
    this.sealer = handshake.session!.sealer;
    this.decoder.opener = handshake.session!.opener;
    this.leavePending();
    this.phase = Phase.READY;
    this.send(readyFrame());
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
    this.send(replies.finish());
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
          this.send(encodeCallReply(callId, CallStatus.OK, reply));
        },
        (err: unknown) => this.replyCallError(callId, err),
      )
      .catch((err: unknown) => this.replyCallError(callId, err));
  }

  private replyCallError(callId: number, err: unknown): void {
    if (this.phase !== Phase.READY) return;
    let msg = Buffer.from(err instanceof Error ? err.message : String(err), "utf8");
    if (msg.length > MAX_CALL_ERROR_BYTES) msg = msg.subarray(0, MAX_CALL_ERROR_BYTES);
    this.send(encodeCallReply(callId, CallStatus.ERROR, msg));
  }

  private checkIdle(): void {
    const idle = this.server.opts.idleTimeoutMs;
    const silent = performance.now() - this.lastRx;
    // setTimeout may fire a fraction of a millisecond early by this clock.
    if (silent >= idle - 1) {
      this.reject("idle", "idle timeout");
      return;
    }
    this.timer = setTimeout(() => this.checkIdle(), idle - silent);
  }

  /**
   * Close for cause: counted, logged at debug, and summarised by `reason` (strangers may
   * probe the port; a line each would let them fill the log). An idle timeout of an
   * authenticated peer is routine and not summarised.
   */
  reject(reason: string, message: string): void {
    if (this.phase === Phase.CLOSED) return;
    const server = this.server;
    server.stats.connectionsRejected++;
    if (reason !== "idle") server.refusals.note(reason, this.source);
    server.log.debug({ reason: message, peer: this.remoteNodeId || undefined, remote: this.source }, "peer connection closed");
    this.close();
  }

  private leavePending(): void {
    const server = this.server;
    if (!server.pending.delete(this)) return;
    const n = (server.pendingBySource.get(this.source) ?? 1) - 1;
    if (n === 0) server.pendingBySource.delete(this.source);
    else server.pendingBySource.set(this.source, n);
  }

  close(): void {
    if (this.phase === Phase.CLOSED) return;
    this.leavePending();
    this.phase = Phase.CLOSED;
    this.handshake = null;
    this.decoder.stop();
    clearTimeout(this.timer);
    this.socket.destroy();
    this.server.conns.delete(this);
  }
}

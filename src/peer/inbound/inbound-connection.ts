// One accepted peer connection: the handshake, then frames checked by tag and
// handled (DECIDE, PING, CALL). Its server holds what connections share.

import { performance } from "node:perf_hooks";
import type { PendingConnection } from "../link/admission.js";
import {
  CallStatus,
  DecideCode,
  DecideItemFlag,
  FrameType,
  MAX_CALL_ERROR_BYTES,
  MAX_FRAME_BYTES,
  MAX_HANDSHAKE_FRAME_BYTES,
  NO_BUDGET,
  PROTOCOL_CALL,
} from "../wire/constants.js";
import { decodeRange, encodeRange, type ProtocolRange } from "../link/versions.js";
import { FrameAuthError, FrameError } from "../errors.js";
import { FrameDecoder } from "../wire/frame.js";
import { HandshakeError, ServerHandshake, readyFrame } from "../link/handshake.js";
import { decodeCall, decodePing, encodeCallReply, encodePong } from "../wire/messages.js";
import type { KeyObject } from "node:crypto";
import type { PendingConnections } from "../link/admission.js";
import type { PeerLogger } from "../logger.js";
import type { DecideBatchReader, DecideQuery, DecideReplyWriter, DecideResult, DecodedQuery } from "../wire/messages.js";
import type { FrameSealer } from "../link/session.js";
import type { PeerSocket } from "../link/transport.js";

export interface PeerServerHandler {
  /**
   * Decide one forwarded request locally (a forwarded request is never
   * forwarded again). Synchronous; write the answer into `out`, an object
   * reused for every item, as is `query` (read it inside the call, do not keep it; its
   * `algorithm` is the code the item carried, any u8, for the handler to resolve). A throw
   * answers this item with code 2 (error) and leaves its neighbours alone. `now`: the wall
   * clock (unix ms), read once per DECIDE frame for all its items.
   */
  decide(query: DecideQuery, out: DecideResult, now: number): void;
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
  /** An authenticated connection of `nodeId` closed (whatever the cause). */
  onPeerClosed?(nodeId: string): void;
}

/** Counters for metrics and tests. */
export interface PeerServerStats {
  /** Frames received on authenticated connections. */
  framesReceived: number;
  decideFrames: number;
  decideItems: number;
  /** Socket reads that carried at least one DECIDE frame: decideFrames / decideReads is how many frames one read amortises. */
  decideReads: number;
  /** Items whose handler threw (answered with code 2). */
  decideErrors: number;
  /** Items dropped undecided because their frame's deadline budget ran out before they were reached. */
  decideExpired: number;
  calls: number;
  handshakesCompleted: number;
  /** Connections closed for a failed or late handshake, bad frames, or idleness. */
  connectionsRejected: number;
  /** Frames whose tag did not verify (each closed its connection). */
  framesRefused: number;
  /** Unauthenticated connections closed to make room for a newer one. */
  pendingEvicted: number;
}

/** What a connection needs of its server (PeerServer). */
export interface ConnectionHost {
  readonly key: KeyObject;
  readonly nodeId: string;
  readonly opts: {
    readonly handler: PeerServerHandler;
    readonly handshakeTimeoutMs: number;
    readonly idleTimeoutMs: number;
    readonly pongTag: () => string;
    readonly zone: string;
    readonly onDecideFrame: (items: number) => void;
    readonly protocol: ProtocolRange;
    readonly membersTag: (asked: string) => string;
  };
  readonly log: PeerLogger;
  readonly stats: PeerServerStats;
  readonly pending: PendingConnections;
  readonly conns: Set<InboundConnection>;
  // One reader and one result object serve every connection: decisions are synchronous.
  readonly reader: DecideBatchReader;
  readonly replies: DecideReplyWriter;
  readonly out: DecideResult;
  readonly query: DecodedQuery;
  noteRejected(reason: string, source: string): void;
}

const enum Phase {
  HANDSHAKE,
  READY,
  CLOSED,
}

/** One accepted connection. */
export class InboundConnection implements PendingConnection {
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
    private readonly server: ConnectionHost,
    private readonly socket: PeerSocket,
    readonly source: string,
  ) {
    server.pending.add(this);
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
    const framesBefore = this.server.stats.decideFrames;
    // Replies to every frame of this chunk leave in one write.
    this.socket.cork();
    try {
      this.decoder.push(chunk);
      if (this.server.stats.decideFrames !== framesBefore) this.server.stats.decideReads++;
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
        this.send(encodePong(decodePing(body), Date.now(), this.server.opts.pongTag()));
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
    this.server.pending.remove(this);
    this.phase = Phase.READY;
    this.send(readyFrame(this.server.opts.zone));
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
    const { reader, replies, out, query, stats } = server;
    const handler = server.opts.handler;
    // Validates the whole frame first: a bad item anywhere throws before any item is decided.
    reader.decode(body);
    const n = reader.count;
    stats.decideFrames++;
    stats.decideItems += n;
    server.opts.onDecideFrame(n);
    // The sender stops waiting for these answers once their budget, counted from this frame's
    // receipt (the read of the chunk that completed it), has run out: deciding them now would
    // count requests its callers were told were not counted (`degraded`). Dropped unanswered.
    if (reader.budgetUs !== NO_BUDGET && (performance.now() - this.lastRx) * 1000 >= reader.budgetUs) {
      stats.decideExpired += n;
      return;
    }
    const { reqIds, algorithms, limits, durations, costs, flags, namespaces, identifiers, chargeIds } = reader;
    replies.begin(n);
    // One wall-clock read for the frame, not one per item: Date.now() is past 2^31, so each
    // read is a clock call and a heap number (~90-150 ns here, microbenchmark).
    const now = Date.now();
    for (let i = 0; i < n; i++) {
      out.code = DecideCode.ERROR;
      out.remaining = 0;
      out.resetTime = 0;
      out.retryAfterMs = 0;
      out.flags = 0;
      out.granted = 0;
      query.namespace = namespaces[i]!;
      query.identifier = identifiers[i]!;
      query.algorithm.code = algorithms[i]!;
      query.limit = limits[i]!;
      query.duration = durations[i]!;
      query.charge = (flags[i]! & DecideItemFlag.CHARGE) !== 0;
      query.cost = (flags[i]! & DecideItemFlag.REFUND) !== 0 ? -costs[i]! : costs[i]!;
      query.overridable = (flags[i]! & DecideItemFlag.OVERRIDABLE) !== 0;
      query.opening = (flags[i]! & DecideItemFlag.OPENING) !== 0;
      query.chargeId = (flags[i]! & DecideItemFlag.CHARGE_ID) !== 0 ? chargeIds[i]! : undefined;
      let code: number;
      try {
        handler.decide(query, out, now);
        code = out.code === DecideCode.ALLOWED || out.code === DecideCode.BLOCKED ? out.code : DecideCode.ERROR;
      } catch (err) {
        stats.decideErrors++;
        // Logged at debug only: a broken handler would otherwise log at request rate.
        server.log.debug({ err, ns: namespaces[i] }, "peer decide handler threw");
        replies.put(reqIds[i]!, DecideCode.ERROR, 0, 0, 0);
        continue;
      }
      replies.put(
        reqIds[i]!,
        code,
        out.remaining,
        out.resetTime,
        out.retryAfterMs,
        out.flags,
        out.limit,
        out.duration,
        out.algorithm,
        out.granted,
        out.grantWindowStart,
      );
    }
    this.send(replies.finish());
  }

  private onCall(body: Buffer): void {
    const { callId, method, payload } = decodeCall(body);
    const server = this.server;
    server.stats.calls++;
    if (method === PROTOCOL_CALL) {
      // The link's own: the client's range (validated), answered with this node's. Which version
      // runs is the client's to work out; this end answers each request in the form it came in.
      const asked = decodeRange(payload);
      this.send(encodeCallReply(callId, CallStatus.OK, encodeRange(server.opts.protocol, server.opts.membersTag(asked.membersTag))));
      return;
    }
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
   * probe the port; a line each would let them fill the log).
   */
  reject(reason: string, message: string): void {
    if (this.phase === Phase.CLOSED) return;
    this.server.noteRejected(reason, this.source);
    this.server.log.debug({ reason: message, peer: this.remoteNodeId || undefined, remote: this.source }, "peer connection closed");
    this.close();
  }

  close(): void {
    if (this.phase === Phase.CLOSED) return;
    this.server.pending.remove(this);
    const wasReady = this.phase === Phase.READY;
    this.phase = Phase.CLOSED;
    this.handshake = null;
    this.decoder.stop();
    clearTimeout(this.timer);
    this.socket.destroy();
    this.server.conns.delete(this);
    if (wasReady) {
      try {
        this.server.opts.handler.onPeerClosed?.(this.remoteNodeId);
      } catch (err) {
        this.server.log.warn({ err: (err as Error).message }, "onPeerClosed failed");
      }
    }
  }
}

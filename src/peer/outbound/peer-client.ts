// The calling end of the peer channel: one persistent, authenticated connection to one remote node, batching
// every decide() of an event-loop turn into one DECIDE frame, with per-request deadlines, a heartbeat failure
// detector and reconnection with backoff.

import { EventEmitter } from "node:events";
import type { KeyObject } from "node:crypto";
import { performance } from "node:perf_hooks";
import { FrameType, MAX_FRAME_BYTES, MAX_HANDSHAKE_FRAME_BYTES, PEER_DEFAULTS } from "../wire/constants.js";
import { ownRange } from "../link/versions.js";
import { askRange, LinkProtocol } from "./protocol-ranges.js";
import { DecideQueue } from "./decide-queue.js";
import { CLOSED_ERROR, FrameError, INVALID_ERROR, PeerError, UNAVAILABLE_ERROR } from "../errors.js";
import { FrameDecoder } from "../wire/frame.js";
import { ClientHandshake, secretKey } from "../link/handshake.js";
import { PeerRefusals } from "../link/refusal-log.js";
import type { FrameSealer } from "../link/session.js";
import { NOOP_LOGGER, type PeerLogger } from "../logger.js";
import { MAX_CALL_PAYLOAD_BYTES, decodeCallReply, encodeCall, encodePing } from "../wire/messages.js";
import { PendingCalls } from "./pending-calls.js";
import type { DecideCallback } from "./pending-requests.js";
import type { DecideQuery } from "../wire/messages.js";
import type { PeerClientOptions, PeerClientState } from "./peer-client-options.js";
import { RoundTrip } from "./round-trip.js";
import { ReconnectBackoff } from "./reconnect-backoff.js";
import { FailureDetector } from "./failure-detector.js";
import { processLoopLag } from "./loop-lag.js";
import { connectSocket, type PeerSocket, type PeerTlsOptions } from "../link/transport.js";

export type { PeerClientOptions, PeerClientState };

export interface PeerClient {
  on(event: "up", listener: () => void): this;
  /** `silent`: the peer stopped answering (it may still be running); otherwise its connection was refused or closed */
  on(event: "down", listener: (reason: string, silent: boolean) => void): this;
  on(event: "rtt", listener: (ms: number) => void): this;
  /** the peer's PONG tag (its policy version) changed, or came for the first time */
  on(event: "tag", listener: (tag: string) => void): this;
  once(event: "up", listener: () => void): this;
  once(event: "down", listener: (reason: string, silent: boolean) => void): this;
  once(event: "rtt", listener: (ms: number) => void): this;
}

/**
 * Events: 'up' (handshake done, or frames flowing again after silence), 'down' (reason: connection lost or refused,
 * handshake failed, or no frame for longer than its failure detector allows: failure-detector.ts), 'rtt' (ms of the
 * last PING/PONG round trip). 'up' and 'down' alternate; nothing is emitted after close().
 */
export class PeerClient extends EventEmitter {
  /** 'connecting' until the first connection attempt succeeds or fails, then 'up' or 'down' (kept across reconnection attempts). */
  state: PeerClientState = "connecting";
  /** The peer's node id (options.serverNodeId, proven by its CHALLENGE); null before the first handshake. */
  remoteNodeId: string | null = null;
  /** The peer's zone (ZONE) as its READY said; "" when it set none or before the first handshake. */
  remoteZone = "";
  /** The protocol versions of this link (`link.supports(feature)`), told after each handshake. */
  readonly link: LinkProtocol;
  private readonly roundTrip = new RoundTrip();
  /** the last PONG tag told through "tag"; undefined before the first PONG (of this connection) */
  private lastTag: string | undefined = undefined;
  private readonly key: KeyObject;
  private readonly log: PeerLogger;
  private readonly host: string;
  private readonly port: number;
  private readonly nodeId: string;
  private readonly serverNodeId: string;
  private readonly tls: PeerTlsOptions | undefined;
  private readonly timeoutMs: number;
  private readonly heartbeatIntervalMs: number;
  private readonly failureTimeoutMs: number;
  private readonly backoff: ReconnectBackoff;
  private readonly handshakeTimeoutMs: number;
  private readonly callTimeoutMs: number;

  private socket: PeerSocket | null = null;
  private decoder: FrameDecoder | null = null;
  private handshake: ClientHandshake | null = null;
  private sealer: FrameSealer | null = null;
  private ready = false;
  private closed = false;
  private readonly detector: FailureDetector;
  private readonly loopLag = processLoopLag.start();
  private handshakeTimer: NodeJS.Timeout | null = null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private failureTimer: NodeJS.Timeout | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;

  // The hot path: the turn's batch, the waiters, one deadline timer (decide-queue.ts).
  private readonly queue: DecideQueue;
  private readonly calls = new PendingCalls();
  readonly refusals: PeerRefusals;

  constructor(opts: PeerClientOptions) {
    super();
    this.key = secretKey(opts.secret);
    this.log = opts.logger ?? NOOP_LOGGER;
    this.host = opts.host;
    this.port = opts.port;
    this.nodeId = opts.nodeId;
    this.serverNodeId = opts.serverNodeId;
    this.tls = opts.tls;
    this.timeoutMs = opts.timeoutMs;
    this.heartbeatIntervalMs = opts.heartbeatIntervalMs;
    this.failureTimeoutMs = opts.failureTimeoutMs;
    this.detector = new FailureDetector(opts.failureTimeoutMs);
    this.backoff = new ReconnectBackoff(opts.reconnectMinMs ?? PEER_DEFAULTS.reconnectMinMs, opts.reconnectMaxMs ?? PEER_DEFAULTS.reconnectMaxMs);
    this.handshakeTimeoutMs = opts.handshakeTimeoutMs ?? PEER_DEFAULTS.handshakeTimeoutMs;
    this.callTimeoutMs = opts.callTimeoutMs ?? PEER_DEFAULTS.callTimeoutMs;
    this.link = new LinkProtocol(opts.protocol ?? ownRange(), opts.membersTag);
    this.refusals = new PeerRefusals(this.log, opts.serverNodeId);
    const write = (frames: Buffer): void => {
      if (this.socket !== null) this.send(this.socket, frames);
    };
    this.queue = new DecideQueue(this.timeoutMs, write, () => this.ping());
  }

  /** unix ms (this node's clock) at which the connection last came up; NaN before. A newer connection is a later time. */
  upSince = NaN;

  /** Last PING round trip in ms; NaN until measured. */
  get rttMs(): number {
    return this.roundTrip.rttMs;
  }

  /** The peer's wall clock minus this node's in ms (see RoundTrip); NaN until measured. */
  get clockOffsetMs(): number {
    return this.roundTrip.clockOffsetMs;
  }

  /** ms since the peer's last frame, own pauses included: read at once on waking, before the failure detector runs (docs/shares.md). */
  silentMs(): number {
    return this.detector.sinceHeardMs(performance.now());
  }

  /** Decisions waiting for an answer (including this turn's unsent batch). */
  get pendingCount(): number {
    return this.queue.waiting;
  }

  /** performance.now() when the answer a decide() callback is given left here (decide-queue.ts); NaN: unknown. */
  get answerSentAt(): number {
    return this.queue.answerSentAt;
  }

  /** Answers "allowed" that came back after their waiter had timed out: counted by the peer, answered `degraded` here. */
  get lateAllowed(): number {
    return this.queue.lateAllowed;
  }

  /** Start connecting (and keep reconnecting until close()). Idempotent. */
  connect(): void {
    if (this.closed || this.socket !== null || this.reconnectTimer !== null) return;
    this.open();
  }

  /**
   * Ask the peer for a decision. Every call of one event-loop turn goes out in one DECIDE frame (flushed by
   * setImmediate; decide-queue.ts). `cb` runs exactly once, given `ctx` back (one callback serves every request):
   *  - with (null, result) when the peer answers. `result` is one object reused for every answer: read it
   *    inside the callback, do not keep it;
   *  - with a 'timeout' error when no answer came within timeoutMs;
   *  - with an 'unavailable' error when the connection is not up, or is lost while waiting; with 'invalid'
   *    when the request cannot be encoded, 'closed' after close().
   * Errors are shared frozen instances (no stack capture per request). When the connection is not up, or the
   * request is invalid, `cb` runs synchronously, inside decide(): callers must tolerate that (it saves a tick
   * per request exactly when a peer is failing and load is highest).
   */
  decide(query: DecideQuery, cb: DecideCallback, itemFlags = 0, ctx?: unknown): void {
    if (this.state !== "up") {
      cb(this.closed ? CLOSED_ERROR : UNAVAILABLE_ERROR, null, ctx);
      return;
    }
    if (!this.queue.add(query, cb, itemFlags, ctx)) cb(INVALID_ERROR, null, ctx);
  }

  /**
   * Cold-path request (state hand-off, leave notices): sent at once, not batched. Rejects with a PeerError:
   * 'unavailable', 'too_large' (payload over ~1 MiB), 'timeout', 'remote' (the peer's handler failed; message is the peer's), 'closed'.
   */
  call(method: number, payload: Buffer, timeoutMs: number = this.callTimeoutMs): Promise<Buffer> {
    if (this.state !== "up" || this.socket === null) {
      return Promise.reject(new PeerError(this.closed ? "closed" : "unavailable", `peer ${this.host}:${this.port} is not up`));
    }
    if (!(method >= 0 && method <= 0xffff && Number.isInteger(method))) {
      return Promise.reject(new PeerError("invalid", `call method ${method} is not a u16`));
    }
    if (payload.length > MAX_CALL_PAYLOAD_BYTES) {
      return Promise.reject(new PeerError("too_large", `call payload of ${payload.length} bytes exceeds ${MAX_CALL_PAYLOAD_BYTES}`));
    }
    const socket = this.socket;
    return this.calls.start(method, timeoutMs, (id) => this.send(socket, encodeCall(id, method, payload)));
  }

  /** Skip the rest of the backoff and try at once: the peer just proved it is back (it connected to us). A no-op while connected or connecting. */
  reconnectNow(): void {
    if (this.closed || this.reconnectTimer === null) return;
    clearTimeout(this.reconnectTimer);
    this.backoff.reset();
    this.open();
  }

  /** Close the connection for good. Waiters get 'closed'; no event is emitted. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    if (this.socket !== null) this.lost(this.socket, "closed by owner");
    this.queue.failAll(CLOSED_ERROR);
    this.queue.stop();
    this.state = "down";
  }

  // ------------------------------------------------------------ connection

  private open(): void {
    this.reconnectTimer = null;
    const handshake = new ClientHandshake(this.key, this.nodeId, this.serverNodeId);
    this.handshake = handshake;
    this.sealer = null;
    this.ready = false;
    this.decoder = new FrameDecoder((type, body) => this.onFrame(type, body), MAX_HANDSHAKE_FRAME_BYTES);
    const socket = connectSocket(this.host, this.port, this.tls, () => {
      if (this.socket === socket) socket.write(handshake.start());
    });
    this.socket = socket;
    // Detects dead hosts under a connection that looks open; a merely stopped
    // peer still ACKs keepalives, which the heartbeat below catches.
    socket.setKeepAlive(true, this.failureTimeoutMs);
    // An attempt into a partition gets no answer at all: give it up after the handshake
    // limit and dial again at once (see lost()), rather than back off.
    this.handshakeTimer = setTimeout(() => this.lost(socket, "handshake timeout", true), this.handshakeTimeoutMs);
    socket.on("data", (chunk: Buffer) => {
      if (this.socket === socket) this.onData(chunk);
    });
    socket.on("error", (err) => this.log.debug({ err, peer: `${this.host}:${this.port}` }, "peer socket error"));
    socket.on("close", () => this.lost(socket, "connection closed"));
  }

  private onData(chunk: Buffer): void {
    // One clock read per chunk feeds the failure detector.
    const now = performance.now();
    this.detector.heard(now, this.loopLag.stalledMs(now));
    try {
      this.decoder!.push(chunk);
    } catch (err) {
      if (!this.refusals.noted(err)) this.log.warn({ err, peer: this.remoteNodeId ?? `${this.host}:${this.port}` }, "peer broke the protocol");
      this.lost(this.socket!, `protocol error: ${err instanceof Error ? err.message : String(err)}`);
      return;
    }
    // A silent peer speaks again; only once what it sent has verified, and the ranges were told (onLinked).
    if (this.ready && this.handshake === null && this.state !== "up") this.setUp();
  }

  /** Seal and write frames (whole frames, each with room for its tag); sequence order is write order. */
  private send(socket: PeerSocket, frames: Buffer): void {
    socket.write(this.sealer!.seal(frames));
  }

  private onFrame(type: number, body: Buffer): void {
    if (!this.ready) {
      const socket = this.socket!;
      const handshake = this.handshake!;
      if (handshake.receive(type, body, (frame) => socket.write(frame))) {
        this.remoteZone = handshake.remoteZone;
        this.onReady();
      } else if (handshake.session !== null && this.sealer === null) {
        // The server proved itself: every frame from here on (READY first) is sealed.
        this.sealer = handshake.session.sealer;
        this.decoder!.opener = handshake.session.opener;
      }
      return;
    }
    switch (type) {
      case FrameType.DECIDE_REPLY:
        this.queue.onReply(body);
        return;
      case FrameType.PONG: {
        const now = performance.now();
        this.detector.beat(now, this.loopLag.stalledMs(now));
        const rttMs = this.roundTrip.measure(body, now, Date.now());
        this.queue.budget.onRoundTrip(rttMs, this.roundTrip.echoMs);
        this.emit("rtt", rttMs);
        if (this.roundTrip.tag !== this.lastTag) {
          this.lastTag = this.roundTrip.tag;
          this.emit("tag", this.lastTag);
        }
        return;
      }
      case FrameType.CALL_REPLY:
        this.calls.settle(decodeCallReply(body));
        return;
      default:
        throw new FrameError(`frame type ${type} not accepted by a peer client`);
    }
  }

  /** READY: the ranges first (protocol-ranges.ts); with no version shared the link closes (link.apart says why). */
  private onReady(): void {
    this.ready = true;
    this.decoder!.maxFrameBytes = MAX_FRAME_BYTES;
    const socket = this.socket!;
    void askRange(this.calls, this.link, this.handshakeTimeoutMs, (frames) => this.send(socket, frames)).then((refusal) => {
      if (socket !== this.socket || refusal === null) return;
      if (refusal === undefined) this.onLinked();
      else this.lost(socket, refusal);
    });
  }

  private onLinked(): void {
    const now = performance.now();
    this.detector.reset(now, this.loopLag.stalledMs(now));
    this.queue.budget.reset();
    this.remoteNodeId = this.serverNodeId;
    this.refusals.accepted();
    this.handshake = null;
    this.backoff.reset();
    clearTimeout(this.handshakeTimer!);
    this.handshakeTimer = null;
    this.heartbeatTimer = setInterval(() => this.ping(), this.heartbeatIntervalMs);
    // At once, not a heartbeat later: the PONG measures the peer's clock, which forwarded
    // answers' reset times are converted with (docs/peer-protocol.md), within one round trip of "up".
    this.ping();
    this.failureTimer = setTimeout(() => this.checkSilence(), this.failureTimeoutMs);
    this.log.debug({ peer: this.remoteNodeId }, "peer connection up");
    this.setUp();
  }

  private ping(): void {
    if (this.socket === null) return;
    const at = performance.now();
    this.queue.budget.onPingSent(at);
    this.send(this.socket, encodePing(FrameType.PING, at));
  }

  private checkSilence(): void {
    // Silence net of this node's own stalls, against a timeout that follows the heartbeats'
    // spread (failure-detector.ts): a starved node does not blame its peers for its own lag.
    const now = performance.now();
    const stalled = this.loopLag.stalledMs(now);
    const silent = this.detector.silenceMs(now, stalled);
    const next = this.detector.remainingMs(now, stalled);
    // setTimeout may fire a fraction of a millisecond early by this clock.
    if (next <= 1) {
      // Drop the silent connection and dial again at once, and again each time an attempt
      // goes unanswered: the old socket's unacknowledged PINGs would be retransmitted with
      // TCP's doubling back-off, so after a partition heals the old connection could stay
      // mute for many seconds, while a fresh SYN gets through at the first try. A stopped
      // peer that resumes answers the next attempt.
      this.lost(this.socket!, `no frame from peer for ${Math.round(silent)} ms (suspected after ${Math.round(this.detector.timeoutMs())} ms)`, true);
      return;
    }
    this.failureTimer = setTimeout(() => this.checkSilence(), next);
  }

  /**
   * The connection `socket` is gone (or must go): clean up, report, reconnect. `silent`:
   * the peer did not answer (rather than refusing or closing), so retry right away:
   * backing off from a peer that may be behind a partition only delays seeing it heal.
   */
  private lost(socket: PeerSocket, reason: string, silent = false): void {
    if (socket !== this.socket) return;
    this.socket = null;
    this.ready = false;
    this.handshake = null;
    this.sealer = null;
    this.decoder?.stop();
    this.decoder = null;
    for (const t of [this.handshakeTimer, this.failureTimer]) if (t !== null) clearTimeout(t);
    if (this.heartbeatTimer !== null) clearInterval(this.heartbeatTimer);
    this.handshakeTimer = this.failureTimer = this.heartbeatTimer = null;
    socket.destroy();
    const err = this.closed ? CLOSED_ERROR : UNAVAILABLE_ERROR;
    this.calls.failAll(err.code, `peer connection lost while waiting: ${reason}`);
    if (this.closed) return;
    this.setDown(reason, silent);
    if (silent) this.backoff.reset();
    this.reconnectTimer = setTimeout(() => this.open(), this.backoff.next());
  }

  private setUp(): void {
    if (this.state === "up") return;
    this.state = "up";
    this.upSince = Date.now();
    this.emit("up");
  }

  private setDown(reason: string, silent: boolean): void {
    // Answered now; their unsent batch is dropped so the peer never decides what was already answered.
    this.queue.failAll(UNAVAILABLE_ERROR);
    // The next connection may reach a restarted peer: its tag is told again.
    this.lastTag = undefined;
    if (this.state === "down") return;
    const wasUp = this.state === "up";
    this.state = "down";
    const fields = { peer: this.remoteNodeId ?? `${this.host}:${this.port}`, reason };
    if (wasUp) this.log.warn(fields, "peer down");
    else this.log.debug(fields, "peer down");
    this.emit("down", reason, silent);
  }
}

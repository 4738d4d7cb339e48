import type { Http2Session, ServerHttp2Stream } from "node:http2";

/** The bounds of the gRPC port (src/config.ts, GRPC_*; docs/operations.md). */
export interface GrpcLimits {
  /** GRPC_MAX_CONNECTIONS: connections held at once, TLS handshakes included */
  readonly maxConnections: number;
  /** GRPC_MAX_CONCURRENT_STREAMS: streams open at once per connection */
  readonly maxConcurrentStreams: number;
  /** GRPC_PREFACE_TIMEOUT_MS: until the TLS handshake, the HTTP/2 preface and the client's SETTINGS are in */
  readonly prefaceTimeoutMs: number;
  /** GRPC_IDLE_TIMEOUT_MS: a connection without a stream this long is closed */
  readonly idleTimeoutMs: number;
  /** GRPC_DEFAULT_DEADLINE_MS: a call without grpc-timeout */
  readonly defaultDeadlineMs: number;
  /** GRPC_MAX_PENDING_BYTES: request bytes not yet complete, the node's calls together */
  readonly maxPendingBytes: number;
}

interface SessionState {
  readonly opened: number;
  /** the client's preface and SETTINGS arrived */
  settled: boolean;
  streams: number;
  /** when the last stream closed (or the connection opened); 0 while a stream is open */
  idleSince: number;
  /** Watch streams open on this connection */
  watches: number;
}

/** A session closed with GOAWAY is destroyed this long after, if its client keeps it open. */
const CLOSE_GRACE_MS = 1000;

/**
 * What the gRPC port holds per connection, bounded: a connection that sends no preface
 * within prefaceTimeoutMs is destroyed, one left without a stream for idleTimeoutMs gets
 * GOAWAY and is closed, and near maxConnections (the listener refuses past it) the
 * connection idle longest is closed to make room for a new one, so connections that send
 * nothing cannot keep a gateway out. One sweep timer for every connection: no timer per call.
 */
export class SessionGuard {
  private readonly states = new Map<Http2Session, SessionState>();
  private readonly sweepTimer: NodeJS.Timeout;
  /** connections this many below the cap start the eviction of idle ones */
  private readonly highWater: number;

  constructor(
    private readonly limits: GrpcLimits,
    private readonly now: () => number = Date.now,
  ) {
    this.highWater = limits.maxConnections - Math.max(1, Math.floor(limits.maxConnections / 16));
    const every = Math.max(50, Math.floor(Math.min(limits.prefaceTimeoutMs, limits.idleTimeoutMs) / 4));
    this.sweepTimer = setInterval(() => this.sweep(), every).unref();
  }

  get size(): number {
    return this.states.size;
  }

  sessions(): IterableIterator<Http2Session> {
    return this.states.keys();
  }

  add(session: Http2Session): void {
    const now = this.now();
    const state: SessionState = { opened: now, settled: false, streams: 0, idleSince: now, watches: 0 };
    this.states.set(session, state);
    session.once("remoteSettings", () => (state.settled = true));
    session.once("close", () => this.states.delete(session));
    if (this.states.size > this.highWater) this.evictIdlest(session);
  }

  /** A stream of `session` opened; its close is tracked here. */
  streamOpened(stream: ServerHttp2Stream): void {
    const state = this.states.get(stream.session!);
    if (state === undefined) return;
    state.streams++;
    state.idleSince = 0;
    stream.once("close", () => {
      if (--state.streams === 0) state.idleSince = this.now();
    });
  }

  /** One more Watch stream on the stream's connection, unless it holds `max` already; the returned function ends it. */
  addWatch(stream: ServerHttp2Stream, max: number): (() => void) | undefined {
    const state = this.states.get(stream.session!);
    if (state === undefined || state.watches >= max) return undefined;
    state.watches++;
    return () => void state.watches--;
  }

  /** GOAWAY to every connection: calls in flight finish, new ones go elsewhere. */
  goAwayAll(): void {
    for (const session of this.states.keys()) if (!session.closed && !session.destroyed) session.close();
  }

  stop(): void {
    clearInterval(this.sweepTimer);
  }

  private sweep(): void {
    const now = this.now();
    for (const [session, state] of this.states) {
      if (!state.settled) {
        if (now - state.opened >= this.limits.prefaceTimeoutMs) session.destroy();
      } else if (state.streams === 0 && state.idleSince > 0 && now - state.idleSince >= this.limits.idleTimeoutMs) close(session);
    }
  }

  /** Near the cap: the connection without a stream idle longest (one that never sent its preface first) makes room. */
  private evictIdlest(except: Http2Session): void {
    let idlest: Http2Session | undefined;
    let since = Infinity;
    for (const [session, state] of this.states) {
      if (session === except || state.streams > 0 || session.closed || session.destroyed) continue;
      const from = state.settled ? state.idleSince : state.opened - this.limits.idleTimeoutMs;
      if (from < since) {
        since = from;
        idlest = session;
      }
    }
    if (idlest !== undefined) {
      if (this.states.get(idlest)!.settled) close(idlest);
      else idlest.destroy();
    }
  }
}

function close(session: Http2Session): void {
  if (session.closed || session.destroyed) return;
  session.close();
  setTimeout(() => {
    if (!session.destroyed) session.destroy();
  }, CLOSE_GRACE_MS).unref();
}

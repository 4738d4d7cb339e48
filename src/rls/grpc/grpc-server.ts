import http2, { type Http2Server, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { KeyScope, type ApiKeyVerifier } from "../../auth/api-keys.js";
import type { Logger } from "../../logger.js";
import { decodeHealthCheckRequest, encodeHealthCheckResponse, encodeRateLimitResponse } from "../wire/codec.js";
import { echo, RLS_BOUNDS } from "../wire/fields.js";
import { RLS_ERRORS } from "../errors.js";
import { CHECK, DEADLINE_EXCEEDED, NOT_FOUND, refusal, serveShouldRateLimit, SHOULD_RATE_LIMIT, WATCH } from "../grpc-call.js";
import { deadlineMs, fail, failWith, frame, openAnswer, PendingBytes, readMessage, reply } from "./grpc-wire.js";
import { SessionGuard, type GrpcLimits } from "./grpc-sessions.js";
import { HealthService, MAX_WATCHES, MAX_WATCHES_PER_CONNECTION, SERVICE_UNKNOWN } from "../health-service.js";
import { GrpcTls, type GrpcTlsFiles } from "./grpc-tls.js";
import type { RlsService } from "../rls-service.js";

export type { GrpcLimits } from "./grpc-sessions.js";

export interface WatchBudget {
  take(): boolean;
  give(): void;
}

export interface GrpcOptions {
  host: string;
  /** 0: any free port */
  port: number;
  /** TLS_CERT_FILE / TLS_KEY_FILE, or GRPC_SERVER_TLS_* with client certificates (grpc-tls.ts); unset: plaintext HTTP/2 */
  tls?: GrpcTlsFiles;
  /** GRPC_AUTH: "api-key" asks every call for `authorization: Bearer <key>`; "none" trusts the network (an mTLS mesh) */
  auth: "api-key" | "none";
  limits: GrpcLimits;
  /** WORKERS > 1: every worker thread listens on the port with SO_REUSEPORT (workers/grpc-door.ts) */
  reusePort?: boolean;
  /**
   * WORKERS > 1: true once the node's drain has begun in any thread; a new connection is then
   * refused. Each thread sends its GOAWAY on its own turn while the others still listen, and a
   * client that reconnects at once must not be served by a thread that has not drained yet.
   */
  refusing?: () => boolean;
}

export interface GrpcDeps {
  /** the node's RLS service, or (in a worker thread) the state owner's, one thread away */
  service: Pick<RlsService, "shouldRateLimit">;
  verifier: ApiKeyVerifier;
  /** the node's readiness (GET /ready), which grpc.health.v1 reports */
  isReady: () => boolean;
  /**
   * The node's Watch streams when several threads serve the port (WORKERS > 1): take() a
   * place before holding one (false: MAX_WATCHES are held, every thread together), give()
   * it back at its end. Unset: this server's own count under MAX_WATCHES.
   */
  watchBudget?: WatchBudget;
  logger: Logger;
}

/**
 * The gRPC port (GRPC_PORT): envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit and
 * grpc.health.v1.Health on Node's own HTTP/2, with gRPC's framing done here (a 5-byte head per
 * message, the status in trailers) and the protobuf codec of codec.ts. Built this way rather
 * than on @grpc/grpc-js because of what each costs per call, in server CPU (bench/rls.mjs,
 * h2load, 50 streams, medians of 3 rounds on a loaded 2-core machine): grpc-js 374 µs with
 * protobuf.js objects and 380 µs with codec.ts (the codec is not where grpc-js spends), this
 * server 98 µs, a constant answer on node:http2 86 µs, POST /limit 21 µs; in the run that
 * measured this server, grpc-js was 277 µs (0.35× for this one). What is left above POST
 * /limit is Node's HTTP/2 itself (the floor is 4.1× a /limit decision).
 * A drain turns health to NOT_SERVING and sends GOAWAY first, so Envoy and Kubernetes stop
 * sending before the port closes.
 *
 * Nothing a client holds is unbounded (docs/security.md): connections (GRPC_MAX_CONNECTIONS,
 * preface and idle timeouts: SessionGuard), streams per connection
 * (GRPC_MAX_CONCURRENT_STREAMS, enforced by HTTP/2 itself), bytes per message
 * (RLS_BOUNDS.messageBytes, 1 KiB for the unauthenticated health service) and for the node
 * (GRPC_MAX_PENDING_BYTES), time per call (grpc-timeout, else GRPC_DEFAULT_DEADLINE_MS),
 * Watch streams (per connection and per node).
 */
export class RlsGrpcServer {
  private readonly server: Http2Server;
  private readonly health: HealthService;
  private readonly tls: GrpcTls | undefined;
  private readonly guard: SessionGuard;
  private readonly pending: PendingBytes;
  private draining = false;
  /** Watch streams open, every connection together */
  private watches = 0;
  /** calls received and not answered yet (a drain waits for 0) */
  inFlight = 0;

  constructor(
    private readonly options: GrpcOptions,
    private readonly deps: GrpcDeps,
  ) {
    this.health = new HealthService(() => !this.draining && deps.isReady());
    const limits = options.limits;
    this.guard = new SessionGuard(limits);
    this.pending = new PendingBytes(limits.maxPendingBytes);
    const settings = { maxConcurrentStreams: limits.maxConcurrentStreams };
    this.tls = options.tls === undefined ? undefined : new GrpcTls(options.tls, deps.logger, { settings, handshakeTimeout: limits.prefaceTimeoutMs });
    this.server = (this.tls === undefined ? http2.createServer({ settings }) : this.tls.server) as Http2Server;
    // invariant: connections held <= maxConnections (the listener refuses the next one)
    this.server.maxConnections = limits.maxConnections;
    this.server.on("session", (session: Http2Session) => {
      session.on("error", () => {});
      if (options.refusing?.() === true) return void session.destroy();
      this.guard.add(session);
    });
    this.server.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => this.onStream(stream, headers));
  }

  /** Resolves with the bound port. */
  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen({ port: this.options.port, host: this.options.host, exclusive: true, reusePort: this.options.reusePort === true }, () => {
        this.server.off("error", reject);
        resolve((this.server.address() as { port: number }).port);
      });
    });
  }

  private onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    stream.on("error", () => {});
    this.guard.streamOpened(stream);
    const path = headers[":path"];
    // every stream has its deadline, answered or not, so none holds its connection open for good
    this.setDeadline(stream, headers["grpc-timeout"], path === WATCH);
    const contentType = headers["content-type"];
    if (headers[":method"] !== "POST" || typeof contentType !== "string" || !contentType.startsWith("application/grpc")) {
      // Not a gRPC call: plain HTTP, as the gRPC over HTTP/2 protocol asks.
      stream.respond({ ":status": 415 }, { endStream: true });
      return;
    }
    if (path !== SHOULD_RATE_LIMIT && path !== CHECK && path !== WATCH) return fail(stream, "unimplemented", `no method ${echo(String(path))}`);
    // A compressed request is refused by its headers: no message of it is read (docs/envoy.md).
    const encoding = headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") return failWith(stream, RLS_ERRORS.unimplemented.grpc, "compressed messages are not accepted");
    let scope: KeyScope | undefined = KeyScope.ANY;
    if (path === SHOULD_RATE_LIMIT && this.options.auth === "api-key") {
      const authorization = headers.authorization;
      scope = this.deps.verifier.scopeOf(typeof authorization === "string" ? authorization : "");
      if (scope === undefined) return fail(stream, "unauthenticated", RLS_ERRORS.unauthenticated.message);
    }
    // The health service needs no key: its messages are a service name, 1 KiB at most.
    const maxBytes = path === SHOULD_RATE_LIMIT ? RLS_BOUNDS.messageBytes : RLS_BOUNDS.healthMessageBytes;
    readMessage(stream, maxBytes, this.pending, (message) => {
      if (message === undefined) return;
      if (path === SHOULD_RATE_LIMIT) this.shouldRateLimit(stream, message, scope!);
      else if (path === CHECK) this.check(stream, message);
      else this.watch(stream, message);
    });
  }

  /**
   * A call's deadline: its grpc-timeout, else GRPC_DEFAULT_DEADLINE_MS (a Watch without
   * grpc-timeout has none: it lasts as long as its client wants, bounded in number). Past
   * it an unanswered call gets DEADLINE_EXCEEDED, and a stream still open is reset.
   */
  private setDeadline(stream: ServerHttp2Stream, timeout: string | string[] | undefined, isWatch: boolean): void {
    if (isWatch && timeout === undefined) return;
    const ms = deadlineMs(timeout, this.options.limits.defaultDeadlineMs);
    const timer = setTimeout(() => {
      if (stream.destroyed) return;
      if (!stream.headersSent) failWith(stream, DEADLINE_EXCEEDED, "deadline exceeded");
      else if (isWatch) stream.end();
      // the client has not ended its side: reset rather than read on
      setImmediate(() => {
        if (!stream.destroyed && !stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
      });
    }, ms);
    stream.once("close", () => clearTimeout(timer));
  }

  private shouldRateLimit(stream: ServerHttp2Stream, message: Buffer, scope: KeyScope): void {
    this.inFlight++;
    serveShouldRateLimit(message, scope, this.deps.service, this.deps.logger, (failure, response) => {
      this.inFlight--;
      if (failure !== undefined) fail(stream, failure.kind, failure.message);
      else reply(stream, encodeRateLimitResponse(response!));
    });
  }

  private check(stream: ServerHttp2Stream, message: Buffer): void {
    const request = this.healthRequest(stream, message);
    if (request === undefined) return;
    const status = this.health.status(request.service);
    if (status === undefined) return failWith(stream, NOT_FOUND, `unknown service "${echo(request.service ?? "")}"`);
    reply(stream, encodeHealthCheckResponse({ status }));
  }

  private watch(stream: ServerHttp2Stream, message: Buffer): void {
    const request = this.healthRequest(stream, message);
    if (request === undefined || stream.destroyed) return;
    const status = this.health.status(request.service);
    // invariant: Watch streams <= MAX_WATCHES_PER_CONNECTION per connection and MAX_WATCHES per node
    const budget = this.deps.watchBudget;
    const placed = budget === undefined ? this.watches < MAX_WATCHES : budget.take();
    const release = placed ? this.guard.addWatch(stream, MAX_WATCHES_PER_CONNECTION) : undefined;
    if (release === undefined) {
      if (placed) budget?.give();
      return fail(stream, "resourceExhausted", "too many Watch streams; use Check");
    }
    this.watches++;
    stream.once("close", () => {
      this.watches--;
      budget?.give();
      release();
    });
    openAnswer(stream);
    if (status === undefined) {
      // SERVICE_UNKNOWN, and the stream stays open as the protocol says: the service may appear.
      stream.write(frame(encodeHealthCheckResponse({ status: SERVICE_UNKNOWN })));
      return;
    }
    const unwatch = this.health.watch(
      (s) => {
        if (!stream.destroyed) stream.write(frame(encodeHealthCheckResponse({ status: s })));
      },
      () => {
        if (!stream.destroyed) stream.end();
      },
    );
    if (unwatch !== undefined) stream.once("close", unwatch);
  }

  /** The HealthCheckRequest, or undefined when the call was answered INVALID_ARGUMENT. */
  private healthRequest(stream: ServerHttp2Stream, message: Buffer): { service?: string } | undefined {
    try {
      return decodeHealthCheckRequest(message);
    } catch (err) {
      const why = refusal(err, "HealthCheckRequest");
      if (why === undefined) throw err;
      fail(stream, "invalidArgument", why);
      return undefined;
    }
  }

  /** Health turns NOT_SERVING and every connection gets GOAWAY; calls in flight are still answered until close(). */
  startDraining(): void {
    this.draining = true;
    this.health.poll();
    this.guard.goAwayAll();
  }

  /** Stops accepting connections, lets calls in flight end, and closes what is left after `graceMs`. */
  close(graceMs: number): Promise<void> {
    this.health.close();
    this.tls?.close();
    this.guard.stop();
    return new Promise((resolve) => {
      const force = setTimeout(() => {
        for (const session of this.guard.sessions()) session.destroy();
      }, graceMs);
      force.unref();
      this.server.close(() => {
        clearTimeout(force);
        resolve();
      });
      this.guard.goAwayAll();
    });
  }
}

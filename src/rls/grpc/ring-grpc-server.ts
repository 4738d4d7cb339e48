import { GrpcTls, tlsServerOptions } from "./grpc-tls.js";
import { KeyScope } from "../../auth/api-keys.js";
import { RLS_ERRORS, type RlsErrorKind } from "../errors.js";
import type { GrpcDeps, GrpcOptions } from "./grpc-server.js";
import { HealthService, MAX_WATCHES, MAX_WATCHES_PER_CONNECTION } from "../health-service.js";
import { decodeHealthCheckRequest, encodeHealthCheckResponse, encodeRateLimitResponse } from "../wire/codec.js";
import { CHECK, DEADLINE_EXCEEDED, grpcTimeoutMs, NOT_FOUND, refusal, serveShouldRateLimit, SHOULD_RATE_LIMIT, WATCH } from "../grpc-call.js";
import { echo, RLS_BOUNDS } from "../wire/fields.js";
import { H2Server } from "../h2/server.js";
import type { H2Stream } from "../h2/stream.js";

/** The bounds of this server (GRPC_* settings); each has the meaning it has for the node:http2 server. */
export interface H2GrpcBounds {
  maxConnections: number;
  maxConcurrentStreams: number;
  prefaceTimeoutMs: number;
  idleTimeoutMs: number;
  defaultDeadlineMs: number;
  maxPendingBytes: number;
  /** set: TLS options (a secureContext, or cert and key) instead of reading GrpcOptions.tls's files */
  tls?: import("node:tls").TlsOptions;
}

const MAX_HEADER_LIST_BYTES = 16 * 1024;

const UNSUPPORTED_MEDIA_TYPE = 415;
/** the body of a 415: what this port serves */
const NOT_GRPC = Buffer.from("this port serves gRPC (content-type: application/grpc, POST)\n");
const COMPRESSED = "compressed messages are not accepted";

/**
 * The gRPC port on ringlimit's own HTTP/2 (GRPC_SERVER_IMPL=ringlimit): the same services
 * and answers as grpc-server.ts on node:http2 (ShouldRateLimit, grpc.health.v1 Check and
 * Watch), the same interface to the node, a fraction of the cost per call (bench/README.md).
 */
export class RingGrpcServer {
  private readonly h2: H2Server;
  private readonly health: HealthService;
  /** GRPC_SERVER_TLS_*: client certificates (a CA, a SAN) and the files' rotation, as on node:http2 */
  private readonly tls: GrpcTls | undefined;
  private draining = false;
  private watches = 0;
  private readonly watchesOf = new WeakMap<object, number>();
  /** calls received and not answered yet (a drain waits for 0) */
  inFlight = 0;

  constructor(
    private readonly options: GrpcOptions,
    private readonly deps: GrpcDeps,
    private readonly bounds: H2GrpcBounds,
  ) {
    this.health = new HealthService(() => !this.draining && deps.isReady());
    const files = bounds.tls === undefined ? options.tls : undefined;
    const tls = bounds.tls ?? (files === undefined ? undefined : tlsServerOptions(files));
    this.h2 = new H2Server(
      {
        limits: {
          maxConcurrentStreams: bounds.maxConcurrentStreams,
          maxHeaderListBytes: MAX_HEADER_LIST_BYTES,
          maxBodyBytes: RLS_BOUNDS.messageBytes + 5,
          pending: { bytes: 0, max: bounds.maxPendingBytes },
        },
        maxConnections: bounds.maxConnections,
        prefaceTimeoutMs: bounds.prefaceTimeoutMs,
        idleTimeoutMs: bounds.idleTimeoutMs,
        ...(tls === undefined ? {} : { tls }),
        ...(options.refusing === undefined ? {} : { refusing: options.refusing }),
      },
      {
        opened: (stream, now) => this.opened(stream, now),
        complete: (stream, tooLarge) => {
          try {
            this.onCall(stream, tooLarge);
          } catch (err) {
            // A fault in one call answers that call; the message stays in the log, not the answer.
            this.deps.logger.error({ err }, "gRPC call failed");
            fail(stream, "internal", RLS_ERRORS.internal.message);
          }
        },
        // an answer begun and held by the client's windows is reset: no stream outlives its deadline
        expired: (stream) => (stream.headersSent ? stream.cancel() : stream.fail(DEADLINE_EXCEEDED, "deadline exceeded")),
      },
    );
    this.tls = files === undefined ? undefined : new GrpcTls(files, deps.logger, {}, this.h2.tlsServer);
  }

  listen(): Promise<number> {
    return this.h2.listen(this.options.port, this.options.host, this.options.reusePort === true);
  }

  /**
   * Headers in: what they decide is answered now, before any message (a client streaming its
   * request, as reflection does, waits for nothing); else the message's bound by method, the
   * caller's key, and the deadline from now, so an unfinished message ends at it too.
   */
  private opened(stream: H2Stream, now: number): void {
    const timeout = stream.grpcTimeout === "" ? undefined : grpcTimeoutMs(stream.grpcTimeout);
    stream.deadlineAt = now + (timeout ?? this.bounds.defaultDeadlineMs);
    // Not a gRPC call: answered 415 at its end, as an HTTP server answers (h2spec drives streams so).
    if (!isGrpc(stream)) return;
    const path = stream.path;
    if (path === CHECK || path === WATCH) stream.maxBody = RLS_BOUNDS.healthMessageBytes + 5;
    else if (path !== SHOULD_RATE_LIMIT) return fail(stream, "unimplemented", `no method ${echo(path)}`);
    else if (this.options.auth === "api-key") {
      const scope = this.deps.verifier.scopeOf(stream.authorization);
      if (scope === undefined) return fail(stream, "unauthenticated", RLS_ERRORS.unauthenticated.message);
      stream.tag = scope; // read at its message
    }
    // A compressed request is refused by its headers: no message of it is read (docs/envoy.md).
    if (stream.grpcEncoding !== "" && stream.grpcEncoding !== "identity") stream.fail(RLS_ERRORS.unimplemented.grpc, COMPRESSED);
  }

  private onCall(stream: H2Stream, tooLarge: boolean): void {
    if (!isGrpc(stream)) return stream.status(UNSUPPORTED_MEDIA_TYPE, NOT_GRPC);
    if (tooLarge) return fail(stream, "resourceExhausted", `${RLS_ERRORS.resourceExhausted.message} (at most ${stream.maxBody - 5} bytes)`);
    const path = stream.path;
    const body = stream.body;
    if (body.length < 5 || body.readUInt32BE(1) !== body.length - 5) return fail(stream, "invalidArgument", "request: not one gRPC message");
    if (body[0] !== 0) return stream.fail(RLS_ERRORS.unimplemented.grpc, COMPRESSED);
    const message = body.subarray(5);
    if (path === SHOULD_RATE_LIMIT) return this.shouldRateLimit(stream, message, (stream.tag as KeyScope | undefined) ?? KeyScope.ANY);
    let service: string | undefined;
    try {
      service = decodeHealthCheckRequest(message).service;
    } catch (err) {
      const why = refusal(err, "HealthCheckRequest");
      if (why === undefined) throw err;
      return fail(stream, "invalidArgument", why);
    }
    if (path === CHECK) return this.check(stream, service);
    this.watch(stream, service);
  }

  private shouldRateLimit(stream: H2Stream, message: Buffer, scope: KeyScope): void {
    this.inFlight++;
    serveShouldRateLimit(message, scope, this.deps.service, this.deps.logger, (failure, response) => {
      this.inFlight--;
      if (failure !== undefined) fail(stream, failure.kind, failure.message);
      else stream.reply(encodeRateLimitResponse(response!));
    });
    // Forwarded to an owner meanwhile: answered when it replies, or DEADLINE_EXCEEDED at the
    // call's deadline (opened()); the decision counts either way, and inFlight waits for it.
  }

  private check(stream: H2Stream, service: string | undefined): void {
    const status = this.health.status(service);
    if (status === undefined) return stream.fail(NOT_FOUND, `unknown service "${echo(service ?? "")}"`);
    stream.reply(encodeHealthCheckResponse({ status }));
  }

  private watch(stream: H2Stream, service: string | undefined): void {
    const connection = stream.owner;
    const onConnection = this.watchesOf.get(connection) ?? 0;
    // invariant: Watch streams <= MAX_WATCHES per node, every thread serving the port together (GrpcDeps.watchBudget)
    const budget = this.deps.watchBudget;
    if (budget === undefined ? this.watches >= MAX_WATCHES : !budget.take()) return fail(stream, "resourceExhausted", "too many Watch streams on this node");
    if (onConnection >= MAX_WATCHES_PER_CONNECTION) {
      budget?.give();
      return fail(stream, "resourceExhausted", "too many Watch streams on this connection");
    }
    const send = (status: number): void => {
      stream.open();
      stream.send(encodeHealthCheckResponse({ status }));
    };
    let unwatch: (() => void) | undefined = () => {};
    // SERVICE_UNKNOWN, and the stream stays open as the protocol says: the service may appear.
    if (this.health.status(service) === undefined) send(3);
    else unwatch = this.health.watch(send, () => stream.end());
    // the health service may bound its watchers too
    if (unwatch === undefined) {
      budget?.give();
      return fail(stream, "resourceExhausted", "too many Watch streams on this node");
    }
    // A Watch lasts as long as the client wants: no deadline once it is served.
    stream.deadlineAt = 0;
    this.watches++;
    this.watchesOf.set(connection, onConnection + 1);
    stream.onClose = () => {
      this.watches--;
      budget?.give();
      this.watchesOf.set(connection, (this.watchesOf.get(connection) ?? 1) - 1);
      unwatch();
    };
  }

  /** Health turns NOT_SERVING; calls are still answered until close(). */
  startDraining(): void {
    this.draining = true;
    this.health.poll();
  }

  /** GOAWAY on every connection, calls in flight answered, what is left closed after `graceMs`. */
  close(graceMs: number): Promise<void> {
    this.health.close();
    this.tls?.close();
    return this.h2.close(graceMs);
  }
}

function isGrpc(stream: H2Stream): boolean {
  return stream.method === "POST" && stream.contentType.startsWith("application/grpc");
}

function fail(stream: H2Stream, kind: RlsErrorKind, message: string): void {
  stream.fail(RLS_ERRORS[kind].grpc, message);
}

import http2, { type Http2Server, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { KeyScope, type ApiKeyVerifier } from "../auth/api-keys.js";
import type { Logger } from "../logger.js";
import { decodeHealthCheckRequest, decodeRateLimitRequest, DecodeError, encodeHealthCheckResponse, encodeRateLimitResponse } from "./wire/codec.js";
import { RLS_ERRORS, type RlsErrorKind, type RlsFailure } from "./errors.js";
import { HealthService } from "./health-service.js";
import { GrpcTls, type GrpcTlsFiles } from "./grpc-tls.js";
import { HEALTH_SERVICE_NAME, RLS_SERVICE_NAME } from "./wire/protos.js";
import type { RlsService } from "./rls-service.js";
import type { RlsResponse } from "./wire/messages.js";

export interface GrpcOptions {
  host: string;
  /** 0: any free port */
  port: number;
  /** TLS_CERT_FILE / TLS_KEY_FILE, or GRPC_SERVER_TLS_* with client certificates (grpc-tls.ts); unset: plaintext HTTP/2 */
  tls?: GrpcTlsFiles;
  /** GRPC_AUTH: "api-key" asks every call for `authorization: Bearer <key>`; "none" trusts the network (an mTLS mesh) */
  auth: "api-key" | "none";
}

export interface GrpcDeps {
  service: RlsService;
  verifier: ApiKeyVerifier;
  /** the node's readiness (GET /ready), which grpc.health.v1 reports */
  isReady: () => boolean;
  logger: Logger;
}

/** Envoy's requests are a few hundred bytes; anything near this bound is not one. */
const MAX_MESSAGE_BYTES = 1 << 20;

const SHOULD_RATE_LIMIT = `/${RLS_SERVICE_NAME}/ShouldRateLimit`;
const CHECK = `/${HEALTH_SERVICE_NAME}/Check`;
const WATCH = `/${HEALTH_SERVICE_NAME}/Watch`;
const NOT_FOUND = 5;

const OK_HEADERS = Object.freeze({ ":status": 200, "content-type": "application/grpc" });
const OK_TRAILERS = Object.freeze({ "grpc-status": "0" });
const WAIT_FOR_TRAILERS = Object.freeze({ waitForTrailers: true });

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
 * A drain turns health to NOT_SERVING first, so Envoy and Kubernetes stop sending before the
 * port closes.
 */
export class RlsGrpcServer {
  private readonly server: Http2Server;
  private readonly health: HealthService;
  private readonly tls: GrpcTls | undefined;
  private readonly sessions = new Set<Http2Session>();
  private draining = false;
  /** calls received and not answered yet (a drain waits for 0) */
  inFlight = 0;

  constructor(
    private readonly options: GrpcOptions,
    private readonly deps: GrpcDeps,
  ) {
    this.health = new HealthService(() => !this.draining && deps.isReady());
    this.tls = options.tls === undefined ? undefined : new GrpcTls(options.tls, deps.logger);
    this.server = (this.tls === undefined ? http2.createServer() : this.tls.server) as Http2Server;
    this.server.on("session", (session: Http2Session) => {
      this.sessions.add(session);
      session.on("close", () => this.sessions.delete(session));
      session.on("error", () => {});
    });
    this.server.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => this.onStream(stream, headers));
  }

  /** Resolves with the bound port. */
  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen({ port: this.options.port, host: this.options.host, exclusive: true }, () => {
        this.server.off("error", reject);
        resolve((this.server.address() as { port: number }).port);
      });
    });
  }

  private onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    stream.on("error", () => {});
    const contentType = headers["content-type"];
    if (headers[":method"] !== "POST" || typeof contentType !== "string" || !contentType.startsWith("application/grpc")) {
      // Not a gRPC call: plain HTTP, as the gRPC over HTTP/2 protocol asks.
      stream.respond({ ":status": 415 }, { endStream: true });
      return;
    }
    const path = headers[":path"];
    if (path !== SHOULD_RATE_LIMIT && path !== CHECK && path !== WATCH) return fail(stream, "unimplemented", `no method ${String(path)}`);
    let scope: KeyScope | undefined = KeyScope.ANY;
    if (path === SHOULD_RATE_LIMIT && this.options.auth === "api-key") {
      const authorization = headers.authorization;
      scope = this.deps.verifier.scopeOf(typeof authorization === "string" ? authorization : "");
      if (scope === undefined) return fail(stream, "unauthenticated", RLS_ERRORS.unauthenticated.message);
    }
    readMessage(stream, (message) => {
      if (message === undefined) return;
      if (path === SHOULD_RATE_LIMIT) this.shouldRateLimit(stream, message, scope!);
      else if (path === CHECK) this.check(stream, message);
      else this.watch(stream, message);
    });
  }

  private shouldRateLimit(stream: ServerHttp2Stream, message: Buffer, scope: KeyScope): void {
    let request;
    try {
      request = decodeRateLimitRequest(message);
    } catch (err) {
      if (err instanceof DecodeError) return fail(stream, "invalidArgument", `request: not a RateLimitRequest (${err.message})`);
      throw err;
    }
    this.inFlight++;
    let answered = false;
    const done = (failure: RlsFailure | undefined, response: RlsResponse | undefined): void => {
      if (answered) return;
      answered = true;
      this.inFlight--;
      if (failure !== undefined) fail(stream, failure.kind, failure.message);
      else reply(stream, encodeRateLimitResponse(response!));
    };
    try {
      this.deps.service.shouldRateLimit(request, scope, done);
    } catch (err) {
      // A fault in one call answers that call; the message stays in the log, not the answer.
      this.deps.logger.error({ err }, "RLS call failed");
      done({ kind: "internal", message: RLS_ERRORS.internal.message }, undefined);
    }
  }

  private check(stream: ServerHttp2Stream, message: Buffer): void {
    const service = decodeOrUndefined(message)?.service;
    const status = this.health.status(service);
    if (status === undefined) return failWith(stream, NOT_FOUND, `unknown service "${service ?? ""}"`);
    reply(stream, encodeHealthCheckResponse({ status }));
  }

  private watch(stream: ServerHttp2Stream, message: Buffer): void {
    const service = decodeOrUndefined(message)?.service;
    if (stream.destroyed) return;
    stream.respond(OK_HEADERS, WAIT_FOR_TRAILERS);
    stream.on("wantTrailers", () => stream.sendTrailers(OK_TRAILERS));
    const status = this.health.status(service);
    if (status === undefined) {
      // SERVICE_UNKNOWN, and the stream stays open as the protocol says: the service may appear.
      stream.write(frame(encodeHealthCheckResponse({ status: 3 })));
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
    stream.on("close", unwatch);
  }

  /** Health turns NOT_SERVING; calls are still answered until close(). */
  startDraining(): void {
    this.draining = true;
    this.health.poll();
  }

  /** Stops accepting connections, lets calls in flight end, and closes what is left after `graceMs`. */
  close(graceMs: number): Promise<void> {
    this.health.close();
    this.tls?.close();
    return new Promise((resolve) => {
      const force = setTimeout(() => {
        for (const session of this.sessions) session.destroy();
      }, graceMs);
      force.unref();
      this.server.close(() => {
        clearTimeout(force);
        resolve();
      });
      for (const session of this.sessions) session.close();
    });
  }
}

/**
 * The one message of a unary call: the whole body, one uncompressed gRPC frame (no
 * grpc-accept-encoding is announced, so clients do not compress). `done(undefined)` when the
 * call was already answered with an error.
 */
function readMessage(stream: ServerHttp2Stream, done: (message: Buffer | undefined) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  stream.on("data", (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_MESSAGE_BYTES + 5) {
      if (chunks.length > 0) chunks.length = 0;
      return;
    }
    chunks.push(chunk);
  });
  stream.on("end", () => {
    if (size > MAX_MESSAGE_BYTES + 5) {
      fail(stream, "resourceExhausted", `${RLS_ERRORS.resourceExhausted.message} (at most ${MAX_MESSAGE_BYTES} bytes)`);
      return done(undefined);
    }
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
    if (body.length < 5 || body.readUInt32BE(1) !== body.length - 5) {
      fail(stream, "invalidArgument", "request: not one gRPC message");
      return done(undefined);
    }
    if (body[0] !== 0) {
      failWith(stream, RLS_ERRORS.unimplemented.grpc, "compressed messages are not accepted");
      return done(undefined);
    }
    done(body.subarray(5));
  });
}

function decodeOrUndefined(message: Buffer): { service?: string } | undefined {
  try {
    return decodeHealthCheckRequest(message);
  } catch {
    return undefined;
  }
}

/** A gRPC message with its 5-byte head: not compressed, then the length. */
function frame(message: Buffer): Buffer {
  const out = Buffer.allocUnsafe(message.length + 5);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  message.copy(out, 5);
  return out;
}

function reply(stream: ServerHttp2Stream, message: Buffer): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond(OK_HEADERS, WAIT_FOR_TRAILERS);
  stream.once("wantTrailers", () => stream.sendTrailers(OK_TRAILERS));
  stream.end(frame(message));
}

function fail(stream: ServerHttp2Stream, kind: RlsErrorKind, message: string): void {
  failWith(stream, RLS_ERRORS[kind].grpc, message);
}

/** A trailers-only answer: the status in the one HEADERS frame, as gRPC allows for errors. */
function failWith(stream: ServerHttp2Stream, code: number, message: string): void {
  if (stream.destroyed || stream.headersSent) return;
  // whatever the client still sends is read and dropped, so the stream can close
  stream.resume();
  stream.respond(
    { ":status": 200, "content-type": "application/grpc", "grpc-status": String(code), "grpc-message": percentEncoded(message) },
    { endStream: true },
  );
}

/** grpc-message is percent-encoded: bytes outside printable ASCII, and "%" itself. */
function percentEncoded(message: string): string {
  return message.replace(/[^\x20-\x24\x26-\x7e]/gu, (c) => encodeURIComponent(c));
}

// Imported rather than the global: in Node 20 globalThis.performance is a lazy getter that
// optimised code cannot inline (LoadGlobalIC + a getter call on every request in `perf`).
import { performance } from "node:perf_hooks";
import { App, SSLApp, us_listen_socket_close, type HttpRequest, type HttpResponse, type TemplatedApp, type us_listen_socket } from "uWebSockets.js";
import { failOpenDecision, newDecision, type Decider, type Decision, type DegradedReason } from "../decision.js";
import { BearerSecret, type ApiKeyVerifier } from "./auth.js";
import { allowedBody, blockedBody, clusterBody, decisionHeaders, errorBody, RING_VERSION_HEADER, type ClusterMemberView } from "./envelope.js";
import { answerBatchRequest, answerResetRequest, type ExchangeEnds } from "./batch-reset.js";
import { Errors, type ErrorDef, type FieldProblem } from "./errors.js";
import type { IdGenerator } from "./ids.js";
import { serveHealth } from "./health.js";
import { listenExclusive } from "./listen.js";
import type { LimitQuery } from "../decision.js";
import { Exchange } from "./exchange.js";
import { toLimitQuery } from "./validation.js";
import { Endpoint } from "../metrics/metrics.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics/metrics.js";

/** Bodies above 16 KiB are refused with 413 (docs/api.md, Errors). */
export const MAX_BODY_BYTES = 16 * 1024;
/** POST /limit/batch: 100 requests of up to ~1 KiB each (docs/api.md). */
export const MAX_BATCH_BODY_BYTES = 128 * 1024;
const JSON_TYPE = "application/json";
/**
 * Header names of the hot path handed to uWS as bytes: a string argument goes through
 * v8::String::Utf8Value (length pass, malloc, copy, free) on every call. Measured with wrk:
 * 18.58 -> 17.97 us/request (6 rounds, medians).
 */
const AUTHORIZATION = Buffer.from("authorization");
const CONTENT_TYPE_LC = Buffer.from("content-type");
const CONTENT_LENGTH = Buffer.from("content-length");
const CONTENT_TYPE = Buffer.from("Content-Type");

/**
 * JSON text is UTF-8 (RFC 8259). Decoding bad bytes to U+FFFD would make distinct
 * identifiers share one limit ("x\xff" and "x\xfe" both become "x\ufffd"), so a fatal
 * decoder refuses them. It reads uWS's ArrayBuffer directly: one call instead of
 * Buffer.from + isUtf8 + toString (~90 ns instead of ~230 ns per body, microbenchmark).
 * ignoreBOM keeps a leading BOM in the text, where JSON.parse refuses it as before.
 */
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

export interface FrontEndOptions {
  host: string;
  port: number;
  tls?: { certFile: string; keyFile: string };
  /** serve /metrics on this port instead of the main one */
  metricsPort?: number;
  /** when set, /metrics requires `Authorization: Bearer <metricsToken>` */
  metricsToken?: string;
  failOpen: boolean;
}

export interface FrontEndDeps {
  decider: Decider;
  verifier: ApiKeyVerifier;
  ids: IdGenerator;
  metrics: Metrics;
  logger: Logger;
  /** whether this node can serve decisions (ring known); /ready reflects it */
  isReady: () => boolean;
  /** the ring as clients see it: GET /cluster and the ring-version header */
  directory: RingDirectory;
  clock?: () => number;
}

/** What GET /cluster tells clients; `version` changes whenever the members or their URLs do. */
export interface RingDirectory {
  readonly self: string;
  readonly version: string;
  readonly members: readonly ClusterMemberView[];
}

/**
 * The uWebSockets.js front end: route → auth (401) → Content-Type (415) → size (413) →
 * JSON (400) → fields (400) → key scope (403) → decide, then write the answer. It knows nothing of where a
 * decision comes from: that is the Decider's business.
 */
export class FrontEnd {
  private readonly app: TemplatedApp;
  private adminApp: TemplatedApp | undefined;
  private listenSockets: us_listen_socket[] = [];
  private draining = false;
  inFlight = 0;
  private readonly clock: () => number;
  private readonly failOpenScratch: Decision = newDecision();
  /** What the batch and reset endpoints (batch-reset.ts) need of this front end. */
  private readonly exchanges: ExchangeEnds;
  private readonly metricsBearer: BearerSecret | undefined;

  constructor(
    private readonly options: FrontEndOptions,
    private readonly deps: FrontEndDeps,
  ) {
    this.clock = deps.clock ?? Date.now;
    this.exchanges = {
      deps,
      failOpen: options.failOpen,
      respond: (x, statusLine, headers, body) => this.respond(x, statusLine, headers, body),
      reject: (x, error, details) => this.reject(x, error, false, details),
      finish: (x) => this.finish(x),
      internalError: (x, err) => this.internalError(x, err),
    };
    this.metricsBearer = options.metricsToken !== undefined ? new BearerSecret(options.metricsToken) : undefined;
    this.app = options.tls !== undefined ? SSLApp({ cert_file_name: options.tls.certFile, key_file_name: options.tls.keyFile }) : App();
    const app = this.app;
    app.post("/limit", (res, req) => this.onPost(res, req, Endpoint.limit, MAX_BODY_BYTES));
    app.post("/limit/batch", (res, req) => this.onPost(res, req, Endpoint.batch, MAX_BATCH_BODY_BYTES));
    app.post("/limit/reset", (res, req) => this.onPost(res, req, Endpoint.reset, MAX_BODY_BYTES));
    for (const path of ["/limit", "/limit/batch", "/limit/reset"]) {
      app.any(path, (res) => {
        res.writeStatus(Errors.methodNotAllowed.statusLine).writeHeader("Allow", "POST");
        this.endError(res, Errors.methodNotAllowed);
      });
    }
    app.get("/cluster", (res, req) => this.onCluster(res, req));
    app.any("/cluster", (res) => {
      res.writeStatus(Errors.methodNotAllowed.statusLine).writeHeader("Allow", "GET");
      this.endError(res, Errors.methodNotAllowed);
    });
    const readiness = () => (this.draining ? "draining" : this.deps.isReady() ? "ready" : "not ready");
    serveHealth(app, readiness);
    if (options.metricsPort === undefined) {
      app.get("/metrics", (res, req) => this.onMetrics(res, req));
    } else {
      // The admin port is plain HTTP even when the main one is TLS, and answers /health and
      // /ready too: Kubernetes probes and Prometheus reach it without certificates.
      this.adminApp = App().get("/metrics", (res, req) => this.onMetrics(res, req));
      serveHealth(this.adminApp, readiness);
      this.adminApp.any("/*", (res) => this.endError(res.writeStatus(Errors.notFound.statusLine), Errors.notFound));
    }
    app.any("/*", (res) => {
      res.writeStatus(Errors.notFound.statusLine);
      this.endError(res, Errors.notFound);
    });
  }

  /** Resolves with the bound ports (main, admin). */
  async listen(): Promise<{ port: number; metricsPort?: number }> {
    const [socket, port] = await listenExclusive(this.app, "http", this.options.host, this.options.port);
    this.listenSockets.push(socket);
    if (this.adminApp === undefined) return { port };
    const [adminSocket, metricsPort] = await listenExclusive(this.adminApp, "metrics", this.options.host, this.options.metricsPort!);
    this.listenSockets.push(adminSocket);
    return { port, metricsPort };
  }

  /** /ready turns 503; requests already accepted keep being served. */
  startDraining(): void {
    this.draining = true;
  }

  /** Stop accepting connections; open keep-alive connections are closed by close(). */
  stopListening(): void {
    for (const s of this.listenSockets) us_listen_socket_close(s);
    this.listenSockets = [];
  }

  close(): void {
    this.stopListening();
    this.app.close();
    this.adminApp?.close();
  }

  private onPost(res: HttpResponse, req: HttpRequest, endpoint: Endpoint, maxBytes: number): void {
    const x = new Exchange(res, endpoint, this.clock(), performance.now());
    this.inFlight++;
    res.onAborted(() => {
      x.aborted = true;
      this.finish(x);
    });

    const scope = this.deps.verifier.scopeOf(req.getHeader(AUTHORIZATION));
    if (scope === undefined) return this.reject(x, Errors.unauthorized);
    x.scope = scope;
    if (!isJsonContentType(req.getHeader(CONTENT_TYPE_LC))) return this.reject(x, Errors.unsupportedMediaType);
    const declaredLength = req.getHeader(CONTENT_LENGTH);
    if (declaredLength !== "" && !(Number(declaredLength) <= maxBytes)) return this.reject(x, Errors.payloadTooLarge, true);

    res.onData((chunk, isLast) => {
      if (x.done) return;
      x.inData = true;
      try {
        x.received += chunk.byteLength;
        if (x.received > maxBytes) return this.reject(x, Errors.payloadTooLarge, true);
        if (isLast && x.body === undefined) {
          // The common case: the whole body in one chunk, decoded straight from uWS's buffer.
          return this.onBody(x, chunk);
        }
        // The chunk's memory is reused by uWS after this callback: copy it.
        x.body = x.body === undefined ? Buffer.from(Buffer.from(chunk)) : Buffer.concat([x.body, Buffer.from(chunk)]);
        if (isLast) this.onBody(x, x.body);
      } catch (err) {
        this.internalError(x, err);
      } finally {
        x.inData = false;
      }
    });
  }

  /** `bytes` may be uWS's buffer: use it synchronously, do not keep it. */
  private onBody(x: Exchange, bytes: ArrayBuffer | Buffer): void {
    let text: string;
    try {
      text = utf8.decode(bytes);
    } catch {
      return this.reject(x, Errors.badRequest, false, [{ field: "body", message: "must be UTF-8 encoded JSON" }]);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return this.reject(x, Errors.badRequest, false, [{ field: "body", message: "must be valid JSON" }]);
    }
    if (x.endpoint === Endpoint.batch) return answerBatchRequest(this.exchanges, x, parsed);
    if (x.endpoint === Endpoint.reset) return answerResetRequest(this.exchanges, x, parsed);
    const result = toLimitQuery(parsed);
    if (!result.ok) return this.reject(x, Errors.badRequest, false, result.problems);
    const query = result.query;
    x.query = query;
    // Checked on the effective namespace (with the product slug): the one the counters live
    // under and the answer names. A 403 does not count.
    if (!x.scope.admits(query.namespace)) return this.reject(x, Errors.forbidden);
    const decider = this.deps.decider;
    try {
      // A local decision comes back synchronously, without a `done` closure per request.
      const decided = decider.decideSync !== undefined ? decider.decideSync(query, x.receivedAt) : undefined;
      if (decided !== undefined) this.answer(x, query, decided);
      else decider.decide(query, x.receivedAt, (decision) => this.answer(x, query, decision));
    } catch (err) {
      if (x.done) return this.internalError(x, err);
      this.deps.logger.error({ err }, "decision failed");
      this.failOpen(x, query, "internal");
    }
  }

  /** Used by deciders that lose their owner and by exceptions in a decision. */
  private failOpen(x: Exchange, query: LimitQuery, reason: DegradedReason): void {
    if (!this.options.failOpen) return this.reject(x, reason === "internal" ? Errors.internal : Errors.unavailable);
    this.answer(x, query, failOpenDecision(query, x.receivedAt, reason, this.failOpenScratch));
  }

  private answer(x: Exchange, query: LimitQuery, d: Decision): void {
    if (x.done) return;
    if (x.aborted) {
      // The client left while a forwarded decision was on its way: res is gone.
      x.done = true;
      return this.finish(x);
    }
    if (d.degraded !== null) {
      this.deps.metrics.countDegraded(d.degraded);
      if (!this.options.failOpen) return this.reject(x, d.degraded === "internal" ? Errors.internal : Errors.unavailable);
    }
    const now = x.receivedAt;
    const secondsToReset = Math.max(0, d.resetTime - Math.floor(now / 1000));
    const processingMs = performance.now() - x.startedAt;
    x.done = true;
    // Each uWS call crosses into C++ and converts its strings; the decided answer's headers
    // go out in one writeHeader (values joined by CRLF) and 200 is uWS's default status.
    // Measured under wrk: status + 3 headers + cork was ~19% of the service's CPU. The
    // joined values hold only algorithm names and integers, never caller input.
    const headers = decisionHeaders(query.algorithm.name, query.limit, query.duration, d.remaining, secondsToReset, this.deps.directory.version);
    if (d.allowed) {
      this.respond(x, undefined, headers, allowedBody(this.deps.ids.ok(), now, query, d, processingMs));
      this.deps.metrics.countRequest(200, query.algorithm.code);
    } else {
      const blockedHeaders = headers + "\r\nRetry-After: " + Math.max(1, Math.ceil(d.retryAfterMs / 1000));
      this.respond(x, Errors.rateLimited.statusLine, blockedHeaders, blockedBody(this.deps.ids.error(), now, query, d, processingMs));
      this.deps.metrics.countRequest(429, query.algorithm.code);
    }
    this.deps.metrics.decisionSeconds.observe(processingMs / 1000);
    this.finish(x);
  }

  /**
   * Write an answer: `statusLine` undefined is 200 (uWS's default), `headers` the
   * Content-Type value with the other headers joined to it by CRLF (decisionHeaders,
   * jsonHeaders). Inside onData the writes are corked already, and no closure is made.
   */
  private respond(x: Exchange, statusLine: string | undefined, headers: string, body: string): void {
    const res = x.res;
    if (x.inData) writeAnswer(res, statusLine, headers, body);
    else res.cork(() => writeAnswer(res, statusLine, headers, body));
  }

  private reject(x: Exchange, error: ErrorDef, closeConnection = false, details?: readonly FieldProblem[]): void {
    if (x.done) return;
    x.done = true;
    if (x.endpoint === Endpoint.limit) this.deps.metrics.countRequest(error.status, x.query?.algorithm.code ?? -1);
    else this.deps.metrics.countEndpoint(x.endpoint, error.status);
    if (x.aborted) return this.finish(x);
    const body = errorBody(this.deps.ids.error(), x.receivedAt, error, details);
    if (closeConnection) {
      // Inside uWS's parser the socket is corked, and end(body, true) only marks the
      // connection for closing after the parse; a request pipelined behind the oversized
      // body then resets that mark and is served. Answered from the next turn instead,
      // uncorked, end(body, true) writes, shuts down and closes at once; a request
      // parsed meanwhile finds this response pending and uWS closes the connection. pause()
      // stops reading the rest of the body from the kernel until then.
      x.res.pause();
      setImmediate(() => {
        if (!x.aborted) x.res.cork(() => this.writeError(x.res, error, body, true));
        this.finish(x);
      });
      return;
    }
    x.res.cork(() => this.writeError(x.res, error, body, false));
    this.finish(x);
  }

  private writeError(res: HttpResponse, error: ErrorDef, body: string, closeConnection: boolean): void {
    res.writeStatus(error.statusLine);
    // RFC 9110 §11.6.1: a 401 must say which scheme it wants. Callers without a key are
    // not told the ring version either.
    if (error === Errors.unauthorized) res.writeHeader("WWW-Authenticate", "Bearer");
    else res.writeHeader(RING_VERSION_HEADER, this.deps.directory.version);
    res.writeHeader("Content-Type", JSON_TYPE).end(body, closeConnection);
  }

  private internalError(x: Exchange, err: unknown): void {
    this.deps.logger.error({ err }, "request failed");
    if (!x.done) this.reject(x, Errors.internal);
  }

  private finish(x: Exchange): void {
    if (x.finished) return;
    x.finished = true;
    this.inFlight--;
  }

  private endError(res: HttpResponse, error: ErrorDef): void {
    res.writeHeader("Content-Type", JSON_TYPE).end(errorBody(this.deps.ids.error(), this.clock(), error));
  }

  /** GET /cluster: the members clients route to, behind the same bearer keys as POST /limit. */
  private onCluster(res: HttpResponse, req: HttpRequest): void {
    if (!this.deps.verifier.verifyHeader(req.getHeader(AUTHORIZATION))) {
      res.writeStatus(Errors.unauthorized.statusLine).writeHeader("WWW-Authenticate", "Bearer");
      return this.endError(res, Errors.unauthorized);
    }
    const dir = this.deps.directory;
    const body = clusterBody(this.deps.ids.ok(), this.clock(), dir.version, dir.self, dir.members);
    res.writeStatus("200 OK").writeHeader(RING_VERSION_HEADER, dir.version).writeHeader("Content-Type", JSON_TYPE).end(body);
  }

  private onMetrics(res: HttpResponse, req: HttpRequest): void {
    if (this.metricsBearer !== undefined && !this.metricsBearer.matches(req.getHeader(AUTHORIZATION))) {
      res.writeStatus(Errors.unauthorized.statusLine).writeHeader("WWW-Authenticate", "Bearer");
      return this.endError(res, Errors.unauthorized);
    }
    let aborted = false;
    res.onAborted(() => (aborted = true));
    const metrics = this.deps.metrics;
    metrics.render().then(
      (body) => {
        if (!aborted) res.cork(() => res.writeStatus("200 OK").writeHeader("Content-Type", metrics.contentType).end(body));
      },
      (err: unknown) => {
        this.deps.logger.error({ err }, "metrics failed");
        if (!aborted) res.cork(() => this.endError(res.writeStatus(Errors.internal.statusLine), Errors.internal));
      },
    );
  }
}

function writeAnswer(res: HttpResponse, statusLine: string | undefined, headers: string, body: string): void {
  if (statusLine !== undefined) res.writeStatus(statusLine);
  res.writeHeader(CONTENT_TYPE, headers).end(body);
}

/** `application/json`, any case, optionally followed by parameters (`; charset=utf-8`). */
export function isJsonContentType(value: string): boolean {
  if (value === JSON_TYPE) return true;
  const semicolon = value.indexOf(";");
  const type = (semicolon < 0 ? value : value.slice(0, semicolon)).trim().toLowerCase();
  return type === JSON_TYPE;
}

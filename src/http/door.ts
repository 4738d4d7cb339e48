// Imported rather than the global: see pipeline.ts.
import { performance } from "node:perf_hooks";
import type { HttpRequest, HttpResponse } from "uWebSockets.js";
import type { ApiKeyVerifier } from "./auth.js";
import type { AnyEndpoint } from "./endpoint.js";
import { errorBody, RING_VERSION_HEADER } from "./envelope.js";
import { Errors, type ErrorDef, type FieldProblem } from "./errors.js";
import { Exchange } from "./exchange.js";
import { DecisionPipeline, type Door, type PipelineDeps } from "./pipeline.js";

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

export interface HttpDoorDeps extends PipelineDeps {
  readonly verifier: ApiKeyVerifier;
}

/**
 * The HTTP door of the decision pipeline, on uWebSockets.js: what every POST endpoint shares
 * before its body is a JSON value — auth (401, and the key's scope) → Content-Type (415) →
 * size (413, declared or counted as the body streams) → UTF-8 and JSON (400) — and the
 * writing of whatever the pipeline answers (cork, status, headers, body).
 */
export class HttpDoor implements Door<HttpResponse> {
  readonly pipeline: DecisionPipeline<HttpResponse>;

  constructor(
    private readonly deps: HttpDoorDeps,
    failOpen: boolean,
    private readonly clock: () => number,
  ) {
    this.pipeline = new DecisionPipeline(deps, failOpen, this);
  }

  /** A POST routed to `endpoint` (server.ts): read it, then hand its body to the pipeline. */
  onPost(res: HttpResponse, req: HttpRequest, endpoint: AnyEndpoint): void {
    const pipeline = this.pipeline;
    const x = new Exchange(res, endpoint, this.clock(), performance.now());
    pipeline.begin();
    res.onAborted(() => {
      x.aborted = true;
      pipeline.finish(x);
    });

    const scope = this.deps.verifier.scopeOf(req.getHeader(AUTHORIZATION));
    if (scope === undefined) return pipeline.refuse(x, Errors.unauthorized);
    x.scope = scope;
    if (!isJsonContentType(req.getHeader(CONTENT_TYPE_LC))) return pipeline.refuse(x, Errors.unsupportedMediaType);
    const maxBytes = endpoint.maxBodyBytes;
    const declaredLength = req.getHeader(CONTENT_LENGTH);
    if (declaredLength !== "" && !(Number(declaredLength) <= maxBytes)) return pipeline.refuse(x, Errors.payloadTooLarge, undefined, true);

    res.onData((chunk, isLast) => {
      if (x.done) return;
      x.inData = true;
      try {
        x.received += chunk.byteLength;
        if (x.received > maxBytes) return pipeline.refuse(x, Errors.payloadTooLarge, undefined, true);
        if (isLast && x.body === undefined) {
          // The common case: the whole body in one chunk, decoded straight from uWS's buffer.
          return this.onBody(x, chunk);
        }
        // The chunk's memory is reused by uWS after this callback: copy it.
        x.body = x.body === undefined ? Buffer.from(Buffer.from(chunk)) : Buffer.concat([x.body, Buffer.from(chunk)]);
        if (isLast) this.onBody(x, x.body);
      } catch (err) {
        pipeline.internalError(x, err);
      } finally {
        x.inData = false;
      }
    });
  }

  /** `bytes` may be uWS's buffer: use it synchronously, do not keep it. */
  private onBody(x: Exchange<HttpResponse>, bytes: ArrayBuffer | Buffer): void {
    let text: string;
    try {
      text = utf8.decode(bytes);
    } catch {
      return this.pipeline.refuse(x, Errors.badRequest, [{ field: "body", message: "must be UTF-8 encoded JSON" }]);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return this.pipeline.refuse(x, Errors.badRequest, [{ field: "body", message: "must be valid JSON" }]);
    }
    this.pipeline.run(x, parsed);
  }

  /**
   * Write an answer: `statusLine` undefined is 200 (uWS's default), `headers` the
   * Content-Type value with the other headers joined to it by CRLF (decisionHeaders,
   * jsonHeaders). Each uWS call crosses into C++ and converts its strings: measured under
   * wrk, status + 3 headers + cork was ~19% of the service's CPU, hence one writeHeader.
   * Inside onData the writes are corked already, and no closure is made.
   */
  write(x: Exchange<HttpResponse>, statusLine: string | undefined, headers: string, body: string): void {
    const res = x.res;
    if (x.inData) writeAnswer(res, statusLine, headers, body);
    else res.cork(() => writeAnswer(res, statusLine, headers, body));
  }

  refuse(x: Exchange<HttpResponse>, error: ErrorDef, details: readonly FieldProblem[] | undefined, close: boolean): void {
    const body = errorBody(this.deps.ids.error(), x.receivedAt, error, details);
    if (close) {
      // Inside uWS's parser the socket is corked, and end(body, true) only marks the
      // connection for closing after the parse; a request pipelined behind the oversized
      // body then resets that mark and is served. Answered from the next turn instead,
      // uncorked, end(body, true) writes, shuts down and closes at once; a request
      // parsed meanwhile finds this response pending and uWS closes the connection. pause()
      // stops reading the rest of the body from the kernel until then.
      x.res.pause();
      setImmediate(() => {
        if (!x.aborted) x.res.cork(() => this.writeError(x.res, error, body, true));
      });
      return;
    }
    x.res.cork(() => this.writeError(x.res, error, body, false));
  }

  private writeError(res: HttpResponse, error: ErrorDef, body: string, closeConnection: boolean): void {
    res.writeStatus(error.statusLine);
    // RFC 9110 §11.6.1: a 401 must say which scheme it wants. Callers without a key are
    // not told the ring version either.
    if (error === Errors.unauthorized) res.writeHeader("WWW-Authenticate", "Bearer");
    else res.writeHeader(RING_VERSION_HEADER, this.deps.directory.version);
    res.writeHeader("Content-Type", JSON_TYPE).end(body, closeConnection);
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

// Imported rather than the global: see pipeline.ts.
import { performance } from "node:perf_hooks";
import type { HttpRequest, HttpResponse } from "uWebSockets.js";
import type { ApiKeyVerifier } from "../auth/api-keys.js";
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
const TRANSFER_ENCODING = Buffer.from("transfer-encoding");
/** Past uWS's cork buffer (16 KiB): see HttpDoor.refuse. */
const CLOSING_BODY_BYTES = 16 * 1024 + 1;

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
    res.onAborted(() => pipeline.left(x));

    const maxBytes = endpoint.maxBodyBytes;
    const declaredLength = req.getHeader(CONTENT_LENGTH);
    const scope = this.deps.verifier.scopeOf(req.getHeader(AUTHORIZATION));
    if (scope === undefined) return pipeline.refuse(x, Errors.unauthorized, undefined, unreadBodyTooLong(req, declaredLength, maxBytes));
    x.scope = scope;
    if (!isJsonContentType(req.getHeader(CONTENT_TYPE_LC))) {
      return pipeline.refuse(x, Errors.unsupportedMediaType, undefined, unreadBodyTooLong(req, declaredLength, maxBytes));
    }
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
    const res = x.res;
    const body = errorBody(this.deps.ids.error(), x.receivedAt, error, details);
    if (!close) {
      res.cork(() => this.writeError(res, error, body, false));
      return;
    }
    // Inside uWS's parser (a route handler or onData) the socket is corked: answers wait in
    // a 16 KiB cork buffer sent when the parse ends, and end(body, true) only marks the
    // connection for closing then, a mark that a request pipelined behind resets (it is then
    // served). Answering from the next turn instead lost more: a request parsed while an
    // answer is pending makes uWS close the connection and drop its cork buffer, with the
    // answers already given to the requests before it (counted, never received). A write
    // longer than the cork buffer makes uWS send the buffer and the write at once and leaves
    // the socket uncorked, and end(body, true) on an uncorked socket shuts it down and closes
    // it there, so uWS parses nothing more from it: the answers before, this one, the close.
    // Hence a closing answer's body is padded with spaces (JSON whitespace) past 16 KiB.
    res.cork(() => this.writeError(res, error, body.padEnd(CLOSING_BODY_BYTES), true));
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

/**
 * Whether a request refused before its body is read (401, 415) must lose its connection:
 * uWS reads and throws away the body of a request answered early, to its declared end
 * (10^12 bytes if it says so) or, chunked, for as long as the sender goes on.
 */
function unreadBodyTooLong(req: HttpRequest, declaredLength: string, maxBytes: number): boolean {
  if (declaredLength !== "") return !(Number(declaredLength) <= maxBytes);
  return req.getHeader(TRANSFER_ENCODING) !== "";
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

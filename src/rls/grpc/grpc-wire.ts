import type { ServerHttp2Stream } from "node:http2";
import { RLS_ERRORS, type RlsErrorKind } from "../errors.js";
import { grpcTimeoutMs, percentEncoded } from "../grpc-call.js";

/** gRPC over HTTP/2 as the RLS door speaks it: message framing, answers, grpc-timeout. */

const OK_HEADERS = Object.freeze({ ":status": 200, "content-type": "application/grpc" });
const OK_TRAILERS = Object.freeze({ "grpc-status": "0" });
const WAIT_FOR_TRAILERS = Object.freeze({ waitForTrailers: true });

/**
 * Request bytes held by calls whose message is not complete yet, for the whole node: the
 * bound that keeps many slow or unfinished calls from holding the node's memory.
 */
export class PendingBytes {
  held = 0;
  constructor(readonly max: number) {}

  /** false, and nothing taken, when `n` more bytes would pass the bound */
  take(n: number): boolean {
    if (this.held + n > this.max) return false;
    this.held += n;
    return true;
  }

  release(n: number): void {
    this.held -= n;
  }
}

/**
 * The one message of a unary call: the whole body, one uncompressed gRPC frame (no
 * grpc-accept-encoding is announced, so clients do not compress). Refused as soon as the
 * bytes pass `maxBytes` (the 5-byte head's declared length is checked when it arrives), or
 * the node's pending bytes are full: no more than `maxBytes` + 5 is ever held for one call.
 * `done(undefined)` when the call was already answered with an error.
 */
export function readMessage(stream: ServerHttp2Stream, maxBytes: number, pending: PendingBytes, done: (message: Buffer | undefined) => void): void {
  let chunks: Buffer[] = [];
  let size = 0;
  let finished = false;
  let headChecked = false;
  const finish = (): void => {
    finished = true;
    pending.release(size);
    stream.off("data", onData);
  };
  const refuse = (kind: RlsErrorKind, message: string): void => {
    finish();
    chunks = [];
    fail(stream, kind, message);
    done(undefined);
  };
  const onData = (chunk: Buffer): void => {
    if (finished) return;
    if (size + chunk.length > maxBytes + 5) return refuse("resourceExhausted", `${RLS_ERRORS.resourceExhausted.message} (at most ${maxBytes} bytes)`);
    if (!pending.take(chunk.length)) return refuse("resourceExhausted", "too many request bytes in flight on this node; retry later");
    size += chunk.length;
    chunks.push(chunk);
    if (!headChecked && size >= 5) {
      headChecked = true;
      const head = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      if (head.readUInt32BE(1) > maxBytes) return refuse("resourceExhausted", `${RLS_ERRORS.resourceExhausted.message} (at most ${maxBytes} bytes)`);
    }
  };
  stream.on("data", onData);
  stream.on("close", () => {
    if (!finished) finish();
  });
  stream.on("end", () => {
    if (finished) return;
    finish();
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
    chunks = [];
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

/** A gRPC message with its 5-byte head: not compressed, then the length. */
export function frame(message: Buffer): Buffer {
  const out = Buffer.allocUnsafe(message.length + 5);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  message.copy(out, 5);
  return out;
}

/** Headers that open a streamed answer (Watch); trailers follow when it ends. */
export function openAnswer(stream: ServerHttp2Stream): void {
  stream.respond(OK_HEADERS, WAIT_FOR_TRAILERS);
  stream.once("wantTrailers", () => stream.sendTrailers(OK_TRAILERS));
}

export function reply(stream: ServerHttp2Stream, message: Buffer): void {
  if (stream.destroyed || stream.headersSent) return;
  openAnswer(stream);
  stream.end(frame(message));
}

export function fail(stream: ServerHttp2Stream, kind: RlsErrorKind, message: string): void {
  failWith(stream, RLS_ERRORS[kind].grpc, message);
}

/** A trailers-only answer: the status in the one HEADERS frame, as gRPC allows for errors. */
export function failWith(stream: ServerHttp2Stream, code: number, message: string): void {
  if (stream.destroyed || stream.headersSent) return;
  // whatever the client still sends is read and dropped (the call's deadline resets the stream)
  stream.resume();
  stream.respond(
    { ":status": 200, "content-type": "application/grpc", "grpc-status": String(code), "grpc-message": percentEncoded(message) },
    { endStream: true },
  );
}

/** A call's deadline in ms from now: its grpc-timeout, else `defaultMs` (a malformed header too). */
export function deadlineMs(header: string | string[] | undefined, defaultMs: number): number {
  return (typeof header === "string" ? grpcTimeoutMs(header) : undefined) ?? defaultMs;
}

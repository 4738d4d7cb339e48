import type { H2Limits, H2Stream, StreamHandler } from "./stream.js";

/**
 * A request body as its DATA frames arrive, counted against the stream's bound and the node's
 * pending bytes (H2Limits.pending). Invariant: pending.bytes is the sum of `received` over the
 * streams whose bodies are held, whatever way each ends (dispatched, too large, reset, gone).
 */

/** Adds `buf[start, end)`; false when the stream's bound or the node's would be passed (the caller answers it). */
export function addBody(stream: H2Stream, limits: H2Limits, buf: Buffer, start: number, end: number, endStream: boolean): boolean {
  const bytes = end - start;
  if (stream.received + bytes > stream.maxBody || limits.pending.bytes + bytes > limits.pending.max) return false;
  stream.received += bytes;
  limits.pending.bytes += bytes;
  // A body that ends in this frame is a view on the read; one that does not is copied, so a
  // stalled stream holds its own bytes, not a whole read's.
  const chunks = (stream.chunks ??= []);
  chunks.push(endStream ? buf.subarray(start, end) : Buffer.from(buf.subarray(start, end)));
  // The gRPC message head declares its length: past the bound, refused before it arrives.
  if (stream.received >= 5 && !stream.headSeen) {
    stream.headSeen = true;
    const head = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    if (5 + head.readUInt32BE(1) > stream.maxBody) return false;
  }
  return true;
}

/** The body whole, let go of by the node's count. */
export function takeBody(stream: H2Stream, limits: H2Limits): Buffer | undefined {
  const chunks = stream.chunks;
  releaseBody(stream, limits);
  return chunks === undefined ? undefined : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

export function releaseBody(stream: H2Stream, limits: H2Limits): void {
  limits.pending.bytes -= stream.received;
  stream.received = 0;
  stream.chunks = undefined;
}

/** Past a bound: answered at once, what it holds let go, the rest of its body dropped. */
export function tooLarge(stream: H2Stream, limits: H2Limits, handler: StreamHandler): void {
  releaseBody(stream, limits);
  stream.dispatched = true;
  handler.complete(stream, true);
  if (!stream.closed) stream.close();
}

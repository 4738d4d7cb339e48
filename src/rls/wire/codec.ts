import type { RlsDescriptor, RlsEntry, RlsRequest, RlsResponse } from "./messages.js";

/**
 * The protobuf encoding of the few messages this service reads and writes, by hand
 * (proto/envoy/..., proto/grpc/health/v1): field numbers and wire types as the .proto files
 * say, unknown fields skipped as protobuf requires. It replaces protobuf.js's generic
 * decode + toObject and fromObject + encode on the call path (bench/rls.mjs measures both).
 */

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

/** A buffer that is not a valid encoding of the expected message. */
export class DecodeError extends Error {
  constructor(what: string) {
    super(`malformed protobuf: ${what}`);
    this.name = "DecodeError";
  }
}

class Reader {
  pos: number;
  constructor(
    readonly buf: Uint8Array,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  /** An unsigned varint of up to 64 bits, as a number (exact up to 2^53). */
  varint(): number {
    const buf = this.buf;
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new DecodeError("truncated varint");
      const b = buf[this.pos++]!;
      result += (b & 0x7f) * scale;
      if (b < 0x80) return result;
      scale *= 128;
    }
    throw new DecodeError("varint over 10 bytes");
  }

  /** The end of a length-delimited field that starts here; `pos` moves to its first byte. */
  delimited(): number {
    const length = this.varint();
    const end = this.pos + length;
    if (end > this.end) throw new DecodeError("length past the end");
    return end;
  }

  string(): string {
    const end = this.delimited();
    const s = Buffer.prototype.utf8Slice.call(this.buf, this.pos, end) as string;
    this.pos = end;
    return s;
  }

  skip(wireType: number): void {
    switch (wireType) {
      case VARINT:
        this.varint();
        return;
      case I64:
        this.pos += 8;
        break;
      case LEN:
        this.pos = this.delimited();
        return;
      case I32:
        this.pos += 4;
        break;
      default:
        throw new DecodeError(`wire type ${wireType}`);
    }
    if (this.pos > this.end) throw new DecodeError("truncated field");
  }
}

/** envoy.service.ratelimit.v3.RateLimitRequest */
export function decodeRateLimitRequest(buf: Uint8Array): RlsRequest {
  const r = new Reader(buf, 0, buf.length);
  const request: RlsRequest = {};
  while (r.pos < r.end) {
    const tag = r.varint();
    const field = Math.floor(tag / 8);
    const type = tag & 7;
    if (field === 1 && type === LEN) request.domain = r.string();
    else if (field === 2 && type === LEN) (request.descriptors ??= []).push(descriptor(r, r.delimited()));
    else if (field === 3 && type === VARINT) request.hits_addend = r.varint() % 4294967296;
    else r.skip(type);
  }
  return request;
}

function descriptor(r: Reader, end: number): RlsDescriptor {
  const d: RlsDescriptor = {};
  while (r.pos < end) {
    const tag = r.varint();
    const field = Math.floor(tag / 8);
    const type = tag & 7;
    if (field === 1 && type === LEN) (d.entries ??= []).push(entry(r, r.delimited()));
    else if (field === 2 && type === LEN) {
      const limitEnd = r.delimited();
      const limit: { requests_per_unit?: number; unit?: number } = {};
      while (r.pos < limitEnd) {
        const t = r.varint();
        if (t === 8) limit.requests_per_unit = r.varint() % 4294967296;
        else if (t === 16) limit.unit = r.varint();
        else r.skip(t & 7);
      }
      d.limit = limit;
    } else if (field === 3 && type === LEN) {
      // google.protobuf.UInt64Value: present (even empty) means set
      const valueEnd = r.delimited();
      let value = 0;
      while (r.pos < valueEnd) {
        const t = r.varint();
        if (t === 8) value = r.varint();
        else r.skip(t & 7);
      }
      d.hits_addend = { value };
    } else if (field === 4 && type === VARINT) d.is_negative_hits = r.varint() !== 0;
    else r.skip(type);
    if (r.pos > end) throw new DecodeError("descriptor past its length");
  }
  return d;
}

function entry(r: Reader, end: number): RlsEntry {
  const e: RlsEntry = {};
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 10) e.key = r.string();
    else if (tag === 18) e.value = r.string();
    else r.skip(tag & 7);
  }
  if (r.pos !== end) throw new DecodeError("entry past its length");
  return e;
}

/** grpc.health.v1.HealthCheckRequest */
export function decodeHealthCheckRequest(buf: Uint8Array): { service?: string } {
  const r = new Reader(buf, 0, buf.length);
  const request: { service?: string } = {};
  while (r.pos < r.end) {
    const tag = r.varint();
    if (tag === 10) request.service = r.string();
    else r.skip(tag & 7);
  }
  return request;
}

/** Appends protobuf fields; a nested message reserves one byte of length and widens it if needed. */
class Writer {
  buf = Buffer.allocUnsafe(256);
  pos = 0;
  private readonly starts: number[] = [];

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  varint(n: number): void {
    this.room(10);
    while (n > 127) {
      this.buf[this.pos++] = (n % 128) | 128;
      n = Math.floor(n / 128);
    }
    this.buf[this.pos++] = n;
  }

  uint(field: number, n: number): void {
    if (n === 0) return;
    this.varint(field * 8);
    this.varint(n);
  }

  string(field: number, s: string): void {
    if (s === "") return;
    const length = Buffer.byteLength(s);
    this.varint(field * 8 + LEN);
    this.varint(length);
    this.room(length);
    this.pos += this.buf.write(s, this.pos, "utf8");
  }

  begin(field: number): void {
    this.varint(field * 8 + LEN);
    this.room(1);
    this.starts.push(this.pos++);
  }

  end(): void {
    const start = this.starts.pop()!;
    const length = this.pos - start - 1;
    if (length < 128) {
      this.buf[start] = length;
      return;
    }
    // Rare (a message over 127 bytes): move the body to make room for a longer length.
    let extra = 0;
    for (let n = length; n > 127; n = Math.floor(n / 128)) extra++;
    this.room(extra);
    this.buf.copy(this.buf, start + 1 + extra, start + 1, this.pos);
    const body = this.pos + extra;
    this.pos = start;
    this.varint(length);
    this.pos = body;
  }

  finish(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.pos));
  }
}

/** envoy.service.ratelimit.v3.RateLimitResponse; fields at their default are left out, as proto3 does. */
export function encodeRateLimitResponse(response: RlsResponse): Buffer {
  const w = new Writer();
  w.uint(1, response.overall_code);
  for (const s of response.statuses) {
    w.begin(2);
    w.uint(1, s.code);
    const limit = s.current_limit;
    if (limit !== undefined) {
      w.begin(2);
      w.uint(1, limit.requests_per_unit ?? 0);
      w.uint(2, limit.unit ?? 0);
      w.string(3, limit.name ?? "");
      w.end();
    }
    w.uint(3, s.limit_remaining ?? 0);
    const reset = s.duration_until_reset;
    if (reset !== undefined) {
      w.begin(4);
      w.uint(1, reset.seconds);
      w.uint(2, reset.nanos);
      w.end();
    }
    w.end();
  }
  for (const h of response.response_headers_to_add) {
    w.begin(3);
    w.string(1, h.key);
    w.string(2, h.value);
    w.end();
  }
  return w.finish();
}

/** grpc.health.v1.HealthCheckResponse */
export function encodeHealthCheckResponse(response: { status: number }): Buffer {
  const w = new Writer();
  w.uint(1, response.status);
  return w.finish();
}

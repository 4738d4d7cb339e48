import { isUtf8 } from "node:buffer";
import type { MetadataValue } from "../../policy/types.js";
import { I64, LEN, NOT_WELL_FORMED, RequestFieldError, RLS_BOUNDS, RLS_FIELDS, tagOf, VARINT } from "./fields.js";
import type { RlsDescriptor, RlsEntry, RlsRequest, RlsResponse } from "./messages.js";

/**
 * The protobuf encoding of the few messages this service reads and writes, by hand
 * (proto/envoy/..., proto/grpc/health/v1): field numbers and wire types as the .proto files
 * say, unknown fields skipped as protobuf requires. It replaces protobuf.js's generic
 * decode + toObject and fromObject + encode on the call path (bench/rls.mjs measures both).
 */

const I32 = 5;

const REQUEST = RLS_FIELDS.request;
const DESCRIPTOR = RLS_FIELDS.descriptor;
const TAG_DOMAIN = tagOf(REQUEST.domain);
const TAG_DESCRIPTOR = tagOf(REQUEST.descriptors);
const TAG_HITS = tagOf(REQUEST.hits_addend);
const TAG_ENTRY = tagOf(DESCRIPTOR.entries);
const TAG_LIMIT = tagOf(DESCRIPTOR.limit);
const TAG_OWN_HITS = tagOf(DESCRIPTOR.hits_addend);
const TAG_NEGATIVE_HITS = tagOf(DESCRIPTOR.is_negative_hits);
const TAG_KEY = tagOf(RLS_FIELDS.entry.key);
const TAG_VALUE = tagOf(RLS_FIELDS.entry.value);
const TAG_RPU = tagOf(RLS_FIELDS.limit.requests_per_unit);
const TAG_UNIT = tagOf(RLS_FIELDS.limit.unit);
const TAG_UINT64_VALUE = tagOf(RLS_FIELDS.uint64Value.value);
const TAG_SERVICE = tagOf(RLS_FIELDS.healthRequest.service);
const UINT32 = 4294967296;

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

  /**
   * A string field of at most `maxBytes`, refused (naming `field`) before it is decoded when
   * longer, and when it is not well-formed UTF-8: decoded, such bytes would turn into U+FFFD,
   * a different key from the one the caller sent.
   */
  string(field: string, maxBytes: number): string {
    const end = this.delimited();
    if (end - this.pos > maxBytes) throw new RequestFieldError(field, `must be at most ${maxBytes} bytes`);
    if (!isUtf8(this.buf.subarray(this.pos, end))) throw new RequestFieldError(field, NOT_WELL_FORMED);
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

/**
 * envoy.service.ratelimit.v3.RateLimitRequest. Counts are checked before each item is
 * allocated: the 65th descriptor or the 33rd entry of a descriptor stops the decoding with a
 * RequestFieldError (INVALID_ARGUMENT), whatever follows it, so no message makes more
 * objects than a valid request has. The caller bounds the message's size
 * (RLS_BOUNDS.messageBytes).
 */
export function decodeRateLimitRequest(buf: Uint8Array): RlsRequest {
  const r = new Reader(buf, 0, buf.length);
  const request: RlsRequest = {};
  let count = 0;
  while (r.pos < r.end) {
    const tag = r.varint();
    if (tag === TAG_DOMAIN) request.domain = r.string("domain", RLS_BOUNDS.domain.max * 3);
    else if (tag === TAG_DESCRIPTOR) {
      // invariant: at most RLS_BOUNDS.descriptors.max descriptors are ever allocated
      if (count === RLS_BOUNDS.descriptors.max) throw new RequestFieldError("descriptors", `at most ${RLS_BOUNDS.descriptors.max} per request`);
      (request.descriptors ??= []).push(descriptor(r, r.delimited(), count++));
    } else if (tag === TAG_HITS) request.hits_addend = r.varint() % UINT32;
    else r.skip(tag & 7);
  }
  return request;
}

function descriptor(r: Reader, end: number, index: number): RlsDescriptor {
  const d: RlsDescriptor = {};
  let count = 0;
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === TAG_ENTRY) {
      // invariant: at most RLS_BOUNDS.entries.max entries per descriptor are ever allocated
      if (count === RLS_BOUNDS.entries.max) throw new RequestFieldError(`descriptors[${index}].entries`, `at most ${RLS_BOUNDS.entries.max} per descriptor`);
      (d.entries ??= []).push(entry(r, r.delimited(), `descriptors[${index}].entries[${count++}]`));
    } else if (tag === TAG_LIMIT) {
      const limitEnd = r.delimited();
      const limit: { requests_per_unit?: number; unit?: number } = {};
      while (r.pos < limitEnd) {
        const t = r.varint();
        if (t === TAG_RPU) limit.requests_per_unit = r.varint() % UINT32;
        else if (t === TAG_UNIT) limit.unit = r.varint();
        else r.skip(t & 7);
      }
      d.limit = limit;
    } else if (tag === TAG_OWN_HITS) {
      // google.protobuf.UInt64Value: present (even empty) means set
      const valueEnd = r.delimited();
      let value = 0;
      while (r.pos < valueEnd) {
        const t = r.varint();
        if (t === TAG_UINT64_VALUE) value = r.varint();
        else r.skip(t & 7);
      }
      d.hits_addend = { value };
    } else if (tag === TAG_NEGATIVE_HITS) d.is_negative_hits = r.varint() !== 0;
    else r.skip(tag & 7);
    if (r.pos > end) throw new DecodeError("descriptor past its length");
  }
  return d;
}

function entry(r: Reader, end: number, at: string): RlsEntry {
  const e: RlsEntry = {};
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === TAG_KEY) e.key = r.string(`${at}.key`, RLS_BOUNDS.keyBytes.max);
    else if (tag === TAG_VALUE) e.value = r.string(`${at}.value`, RLS_BOUNDS.valueBytes.max);
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
    if (tag === TAG_SERVICE) request.service = r.string("service", RLS_BOUNDS.serviceBytes);
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

  /** A field even at its default: a Struct's Value says which of its oneof it holds. */
  always(field: number, wireType: number, n: number): void {
    this.varint(field * 8 + wireType);
    if (wireType === I64) {
      this.room(8);
      this.pos = this.buf.writeDoubleLE(n, this.pos);
    } else this.varint(n);
  }

  /** A string field even when empty (a Struct's key or string_value). */
  text(field: number, s: string): void {
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
  if (response.dynamic_metadata !== undefined) {
    w.begin(RLS_FIELDS.response.dynamic_metadata.number);
    writeStruct(w, response.dynamic_metadata);
    w.end();
  }
  return w.finish();
}

const STRUCT = RLS_FIELDS.struct;
const ENTRY = RLS_FIELDS.structEntry;
const VALUE = RLS_FIELDS.value;

/** google.protobuf.Struct's fields (the caller opened the message). Depth is bounded by where the data comes from: a policy's metadata. */
function writeStruct(w: Writer, struct: { readonly [key: string]: MetadataValue }): void {
  for (const key of Object.keys(struct)) {
    w.begin(STRUCT.fields.number);
    w.text(ENTRY.key.number, key);
    w.begin(ENTRY.value.number);
    writeValue(w, struct[key]!);
    w.end();
    w.end();
  }
}

function writeValue(w: Writer, value: MetadataValue): void {
  if (value === null) w.always(VALUE.null_value.number, VARINT, 0);
  else if (typeof value === "number") w.always(VALUE.number_value.number, I64, value);
  else if (typeof value === "string") w.text(VALUE.string_value.number, value);
  else if (typeof value === "boolean") w.always(VALUE.bool_value.number, VARINT, value ? 1 : 0);
  else if (Array.isArray(value)) {
    w.begin(VALUE.list_value.number);
    for (const item of value as readonly MetadataValue[]) {
      w.begin(RLS_FIELDS.listValue.values.number);
      writeValue(w, item);
      w.end();
    }
    w.end();
  } else {
    w.begin(VALUE.struct_value.number);
    writeStruct(w, value as { readonly [key: string]: MetadataValue });
    w.end();
  }
}

/** grpc.health.v1.HealthCheckResponse */
export function encodeHealthCheckResponse(response: { status: number }): Buffer {
  const w = new Writer();
  w.uint(1, response.status);
  return w.finish();
}

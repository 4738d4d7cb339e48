import { NOT_WELL_FORMED, RequestFieldError, RLS_BOUNDS, RLS_FIELDS, type FieldDef } from "./fields.js";
import { CODE_OVER_LIMIT, type RlsDescriptor, type RlsEntry, type RlsRequest, type RlsResponse, type RlsStatus } from "./messages.js";

/**
 * The RLS v3 messages in proto3's JSON mapping, as POST /json reads and writes them (what
 * envoyproxy/ratelimit's /json takes and gives). Read: every field by its lowerCamelCase JSON
 * name or by its .proto name, `null` as unset, an unknown field refused; uint32 as a number
 * or a decimal string; google.protobuf.UInt64Value as its bare value; an enum by its name or
 * its number. Written: lowerCamelCase names, fields at their default left out, enums as names,
 * google.protobuf.Duration as `"12.345s"`. Problems are named by the .proto's field path, as
 * INVALID_ARGUMENT names them on the gRPC port. The fields and the bounds are the gRPC
 * decoder's (fields.ts): a list is refused by its length before its items are read, a
 * string by its UTF-8 length and when it is not well-formed Unicode (a lone surrogate would
 * be sent to a key's owner as U+FFFD, another key).
 */

/** envoy.type.v3.RateLimitUnit, by name */
export const OVERRIDE_UNIT_NAMES = Object.freeze(["UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR"]);
/** RateLimitResponse.Code, by number */
const CODE_NAMES = Object.freeze(["UNKNOWN", "OK", "OVER_LIMIT"]);
/** RateLimitResponse.RateLimit.Unit, by number (WEEK is 7) */
const RESPONSE_UNIT_NAMES = Object.freeze(["UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR", "WEEK"]);

const UINT32_MAX = 4_294_967_295;

/** A field of a POST /json body that breaks a rule or a bound (the gRPC decoder throws the same). */
export const JsonFieldError = RequestFieldError;
export type JsonFieldError = RequestFieldError;

/** Each message's fields: JSON name → .proto name (the .proto name maps to itself), from the one field table. */
const REQUEST_FIELDS = names(RLS_FIELDS.request);
const DESCRIPTOR_FIELDS = names(RLS_FIELDS.descriptor);
const ENTRY_FIELDS = names(RLS_FIELDS.entry);
const LIMIT_FIELDS = names(RLS_FIELDS.limit);

function names(table: Readonly<Record<string, FieldDef>>): ReadonlyMap<string, string> {
  const map = new Map<string, string>();
  for (const [proto, def] of Object.entries(table)) {
    map.set(def.json, proto);
    map.set(proto, proto);
  }
  return map;
}

/** A RateLimitRequest from its proto3 JSON (already parsed); throws JsonFieldError. */
export function rlsRequestFromJson(body: unknown): RlsRequest {
  const fields = readMessage(body, REQUEST_FIELDS, "request");
  const request: RlsRequest = {};
  const domain = fields.get("domain");
  if (domain !== undefined) request.domain = string(domain, "domain", RLS_BOUNDS.domain.max * 3);
  const hits = fields.get("hits_addend");
  if (hits !== undefined) request.hits_addend = uint(hits, "hits_addend", UINT32_MAX);
  const descriptors = fields.get("descriptors");
  if (descriptors !== undefined) request.descriptors = list(descriptors, "descriptors", RLS_BOUNDS.descriptors.max, "per request", descriptorFromJson);
  return request;
}

function descriptorFromJson(value: unknown, at: string): RlsDescriptor {
  const fields = readMessage(value, DESCRIPTOR_FIELDS, at);
  const d: RlsDescriptor = {};
  const entries = fields.get("entries");
  if (entries !== undefined) d.entries = list(entries, `${at}.entries`, RLS_BOUNDS.entries.max, "per descriptor", entryFromJson);
  const limit = fields.get("limit");
  if (limit !== undefined) {
    const lf = readMessage(limit, LIMIT_FIELDS, `${at}.limit`);
    const rpu = lf.get("requests_per_unit");
    const unit = lf.get("unit");
    d.limit = {};
    if (rpu !== undefined) d.limit.requests_per_unit = uint(rpu, `${at}.limit.requests_per_unit`, UINT32_MAX);
    if (unit !== undefined) d.limit.unit = enumNumber(unit, `${at}.limit.unit`, OVERRIDE_UNIT_NAMES);
  }
  // google.protobuf.UInt64Value: the bare value in JSON. Set, even to 0, it replaces the request's.
  const hits = fields.get("hits_addend");
  if (hits !== undefined) d.hits_addend = { value: uint(hits, `${at}.hits_addend`, Number.MAX_SAFE_INTEGER) };
  const negative = fields.get("is_negative_hits");
  if (negative !== undefined) {
    if (typeof negative !== "boolean") throw new RequestFieldError(`${at}.is_negative_hits`, "must be true or false");
    d.is_negative_hits = negative;
  }
  return d;
}

function entryFromJson(value: unknown, at: string): RlsEntry {
  const fields = readMessage(value, ENTRY_FIELDS, at);
  const entry: RlsEntry = {};
  const key = fields.get("key");
  if (key !== undefined) entry.key = string(key, `${at}.key`, RLS_BOUNDS.keyBytes.max);
  const v = fields.get("value");
  if (v !== undefined) entry.value = string(v, `${at}.value`, RLS_BOUNDS.valueBytes.max);
  return entry;
}

/** The fields of a JSON object by .proto name, null ones left out; a field given twice or unknown is refused. */
function readMessage(value: unknown, known: ReadonlyMap<string, string>, at: string): Map<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new JsonFieldError(at, "must be a JSON object");
  const fields = new Map<string, unknown>();
  for (const name of Object.keys(value)) {
    const proto = known.get(name);
    const where = at === "request" ? name : `${at}.${name}`;
    if (proto === undefined) throw new JsonFieldError(where, "unknown field");
    const v = (value as Record<string, unknown>)[name];
    if (v === null) continue;
    if (fields.has(proto)) throw new JsonFieldError(where, "given twice (by its JSON name and its .proto name)");
    fields.set(proto, v);
  }
  return fields;
}

function list<T>(value: unknown, at: string, max: number, per: string, item: (v: unknown, at: string) => T): T[] {
  if (!Array.isArray(value)) throw new JsonFieldError(at, "must be a JSON array");
  if (value.length > max) throw new JsonFieldError(at, `at most ${max} ${per}`);
  const out: T[] = new Array(value.length);
  for (let i = 0; i < value.length; i++) {
    if (value[i] === null) throw new JsonFieldError(`${at}[${i}]`, "must not be null");
    out[i] = item(value[i], `${at}[${i}]`);
  }
  return out;
}

const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** A string of at most `maxBytes` UTF-8 bytes, well-formed (no lone surrogate). */
function string(value: unknown, at: string, maxBytes: number): string {
  if (typeof value !== "string") throw new JsonFieldError(at, "must be a string");
  // UTF-16 units never outnumber UTF-8 bytes: the byte count is only needed near the bound.
  if (value.length > maxBytes || (value.length * 3 > maxBytes && Buffer.byteLength(value) > maxBytes)) {
    throw new JsonFieldError(at, `must be at most ${maxBytes} bytes`);
  }
  if (!isWellFormed(value)) throw new JsonFieldError(at, NOT_WELL_FORMED);
  return value;
}

/** An unsigned integer as proto3 JSON writes one: a number, or a string of decimal digits. */
function uint(value: unknown, at: string, max: number): number {
  let n: number;
  if (typeof value === "number") n = value;
  else if (typeof value === "string" && /^(0|[1-9][0-9]{0,19})$/.test(value)) n = Number(value);
  else throw new JsonFieldError(at, "must be an unsigned integer (a number or a string of digits)");
  if (!Number.isInteger(n) || n < 0 || n > max) throw new JsonFieldError(at, `must be an integer from 0 to ${max}`);
  return n;
}

/** An enum by its name (exactly as the .proto spells it) or its number. */
function enumNumber(value: unknown, at: string, names: readonly string[]): number {
  if (typeof value === "number" && Number.isInteger(value)) return value;
  const i = typeof value === "string" ? names.indexOf(value) : -1;
  if (i < 0) throw new JsonFieldError(at, `must be one of ${names.join(", ")} (or its number)`);
  return i;
}

/** A RateLimitResponse in proto3 JSON. */
export function rlsResponseJson(response: RlsResponse): string {
  const statuses = response.statuses;
  const out: Record<string, unknown> = { overallCode: CODE_NAMES[response.overall_code] ?? "UNKNOWN" };
  if (statuses.length > 0) out.statuses = statuses.map(statusJson);
  if (response.response_headers_to_add.length > 0) out.responseHeadersToAdd = response.response_headers_to_add;
  // A google.protobuf.Struct's proto3 JSON is the object itself.
  if (response.dynamic_metadata !== undefined) out[RLS_FIELDS.response.dynamic_metadata.json] = response.dynamic_metadata;
  return JSON.stringify(out);
}

function statusJson(status: RlsStatus): Record<string, unknown> {
  const out: Record<string, unknown> = { code: CODE_NAMES[status.code] ?? "UNKNOWN" };
  const limit = status.current_limit;
  if (limit !== undefined) {
    const l: Record<string, unknown> = {};
    if (limit.name !== undefined && limit.name !== "") l.name = limit.name;
    if (limit.requests_per_unit !== undefined && limit.requests_per_unit !== 0) l.requestsPerUnit = limit.requests_per_unit;
    if (limit.unit !== undefined && limit.unit !== 0) l.unit = RESPONSE_UNIT_NAMES[limit.unit] ?? limit.unit;
    out.currentLimit = l;
  }
  if (status.limit_remaining !== undefined && status.limit_remaining !== 0) out.limitRemaining = status.limit_remaining;
  const d = status.duration_until_reset;
  if (d !== undefined) out.durationUntilReset = durationJson(d.seconds, d.nanos);
  return out;
}

/** google.protobuf.Duration in JSON: seconds with 0, 3, 6 or 9 fractional digits, then "s". */
export function durationJson(seconds: number, nanos: number): string {
  if (nanos === 0) return `${seconds}s`;
  const digits = nanos % 1_000_000 === 0 ? 3 : nanos % 1000 === 0 ? 6 : 9;
  const fraction = String(nanos).padStart(9, "0").slice(0, digits);
  return `${seconds}.${fraction}s`;
}

/** Whether an answer is over the limit (POST /json answers it with 429). */
export function isOverLimit(response: RlsResponse): boolean {
  return response.overall_code === CODE_OVER_LIMIT;
}

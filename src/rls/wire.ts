/**
 * The RLS v3 messages as this service reads and writes them (proto/envoy/...): plain
 * objects with the .proto's field names, enums as numbers, 64-bit integers as numbers.
 * A field the caller left unset is undefined (or null for a message, as proto3 JSON allows).
 */

/** envoy.service.ratelimit.v3.RateLimitResponse.Code */
export const CODE_UNKNOWN = 0;
export const CODE_OK = 1;
export const CODE_OVER_LIMIT = 2;

/** `limit_remaining` of an `unlimited` rule: uint32's largest value, as envoyproxy/ratelimit answers */
export const UNLIMITED_REMAINING = 4_294_967_295;

export interface RlsEntry {
  key?: string;
  value?: string;
}

export interface RlsDescriptor {
  entries?: RlsEntry[];
  limit?: { requests_per_unit?: number; unit?: number | string } | null;
  /** google.protobuf.UInt64Value: set (even to 0) replaces the request's hits_addend */
  hits_addend?: { value?: number } | null;
}

export interface RlsRequest {
  domain?: string;
  descriptors?: RlsDescriptor[];
  /** 0 or unset counts 1 */
  hits_addend?: number;
}

/**
 * Fields that hold their type's default (0, "") are left out of answers: the encoder writes
 * every field it is given, and proto3 readers take a missing field as its default anyway.
 */
export interface RlsCurrentLimit {
  name?: string;
  requests_per_unit?: number;
  /** RateLimitResponse.RateLimit.Unit */
  unit?: number;
}

export interface RlsDuration {
  seconds: number;
  nanos: number;
}

export interface RlsStatus {
  code: number;
  current_limit?: RlsCurrentLimit;
  limit_remaining?: number;
  duration_until_reset?: RlsDuration;
}

export interface RlsHeader {
  key: string;
  value: string;
}

export interface RlsResponse {
  overall_code: number;
  statuses: RlsStatus[];
  response_headers_to_add: RlsHeader[];
}

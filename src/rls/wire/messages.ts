import type { MetadataValue, RlsUnit } from "../../policy/types.js";

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
  /** Envoy 1.38: the descriptor's hits are given back (a refund, the count never below zero; a concurrency rule frees its oldest slots: lease-release.ts) */
  is_negative_hits?: boolean | null;
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
  /** RESPONSE_DYNAMIC_METADATA: a google.protobuf.Struct for Envoy's filter metadata (docs/envoy.md) */
  dynamic_metadata?: { readonly [key: string]: MetadataValue } | undefined;
}

const DAY = 86_400;

/**
 * envoy.type.v3.RateLimitUnit, the unit of a caller's `limit` override, by number: its
 * name and its window in seconds (a month is 30 days and a year 365, as envoyproxy/ratelimit
 * counts them). It has no week; 0 (UNKNOWN) is no unit.
 */
export const OVERRIDE_UNITS: readonly (readonly [RlsUnit, number] | undefined)[] = Object.freeze([
  undefined,
  ["second", 1],
  ["minute", 60],
  ["hour", 3600],
  ["day", DAY],
  ["month", 30 * DAY],
  ["year", 365 * DAY],
]);

/** The override unit's number from its proto3 JSON name (`"MINUTE"`) or number; undefined when it names none. */
export function overrideUnitNumber(unit: number | string | undefined): number | undefined {
  if (unit === undefined) return 0;
  if (typeof unit === "number") return Number.isInteger(unit) && unit >= 0 && unit < OVERRIDE_UNITS.length ? unit : undefined;
  const i = OVERRIDE_UNITS.findIndex((u) => u !== undefined && u[0] === unit.toLowerCase());
  return unit === "UNKNOWN" ? 0 : i > 0 && unit === unit.toUpperCase() ? i : undefined;
}

/** RateLimitResponse.RateLimit.Unit of a rule's unit; 0 (UNKNOWN) for a window given in seconds. */
export function responseUnit(unit: RlsUnit | undefined): number {
  switch (unit) {
    case "second":
      return 1;
    case "minute":
      return 2;
    case "hour":
      return 3;
    case "day":
      return 4;
    case "month":
      return 5;
    case "year":
      return 6;
    case "week":
      return 7;
    default:
      return 0;
  }
}

import type { RlsUnit } from "../policy/types.js";

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

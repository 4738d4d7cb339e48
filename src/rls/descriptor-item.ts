import { algorithmByName, DEFAULT_ALGORITHM, type Algorithm } from "../algorithms/index.js";
import type { Decision, DegradedReason, LimitQuery } from "../decision.js";
import type { RlsDescriptorEntries, RlsMatch, RlsRule } from "../policy/types.js";
import { counterIdentifier, entriesKey } from "./counter-id.js";
import {
  CODE_OK,
  CODE_OVER_LIMIT,
  OVERRIDE_UNITS,
  overrideUnitNumber,
  responseUnit,
  UNLIMITED_REMAINING,
  type RlsCurrentLimit,
  type RlsDescriptor,
  type RlsStatus,
} from "./wire/messages.js";

/** What a descriptor asks for, once matched. */
export const NO_RULE = 0;
export const UNLIMITED = 1;
/** over before counting anything: a limit of 0, or more hits than the limit */
export const OVER = 2;
export const COUNTED = 3;

/** One descriptor of one call, from its match to its decision. */
export interface Item {
  kind: number;
  rule: RlsRule | undefined;
  /** the metric key of this descriptor; undefined: counted in no per-rule metric */
  metricKey: string | undefined;
  hits: number;
  query: LimitQuery | undefined;
  allowed: boolean;
  remaining: number;
  /** unix ms of the end of the window or of the full reset (a full concurrency key: of its next free slot) */
  resetMs: number;
  degraded: DegradedReason | null;
}

const FIXED_WINDOW = algorithmByName("fixed-window")!;
const CONCURRENCY = algorithmByName("concurrency")!;

/** Match a descriptor to what it is counted against: its own `limit` first, else its rule. */
export function planItem(
  domain: string,
  entries: RlsDescriptorEntries,
  override: RlsDescriptor["limit"],
  match: RlsMatch | undefined,
  hits: number,
  now: number,
  /** RLS_COUNT_BLOCKED, which a rule's count_blocked overrides; null: never (RLS_ALL_OR_NOTHING: a batch holds no charge) */
  countBlocked: boolean | null,
): Item {
  const item: Item = {
    kind: NO_RULE,
    rule: undefined,
    metricKey: match?.metricKey,
    hits,
    query: undefined,
    allowed: true,
    remaining: 0,
    resetMs: 0,
    degraded: null,
  };
  let rule: RlsRule | undefined;
  let identifier: string;
  if (override !== undefined && override !== null) {
    // The caller's limit, used as given, fixed window; shadow_mode of a matching rule does not
    // apply, nor its name (envoyproxy/ratelimit's answer for an override carries none).
    const [unit, seconds] = OVERRIDE_UNITS[overrideUnitNumber(override.unit)!]!;
    rule = {
      name: undefined,
      limit: override.requests_per_unit ?? 0,
      duration: seconds,
      unit,
      algorithm: DEFAULT_ALGORITHM,
      unlimited: false,
      shadow: false,
      metricKey: match?.metricKey ?? "",
    };
    identifier = counterIdentifier(entriesKey(entries));
  } else {
    if (match === undefined) return item;
    rule = match.rule;
    if (rule.unlimited) {
      item.kind = UNLIMITED;
      return item;
    }
    identifier = counterIdentifier(match.counterKey);
  }
  item.rule = rule;
  const algorithm: Algorithm = algorithmByName(rule.algorithm) ?? FIXED_WINDOW;
  // Every hit counted, past the limit too (debt), as envoyproxy/ratelimit counts them: a
  // descriptor is OVER_LIMIT while its count is past the limit, and a 0-hit check counts nothing.
  // Else (count_blocked false) a hit that does not fit is refused and not counted, as on POST /limit.
  // A refund (negative hits) is always a charge: it gives back whatever the count is.
  // A concurrency rule holds slots, never debt: a hit acquires one if free (a refund frees the
  // oldest: lease-release.ts).
  const charge = algorithm.name !== "concurrency" && (hits < 0 || (countBlocked !== null && (rule.countBlocked ?? countBlocked)));
  if (rule.limit === 0 || (!charge && hits > rule.limit)) {
    // Blocked without counting, until the window ends.
    item.kind = OVER;
    item.allowed = false;
    item.resetMs = windowEnd(now, rule.duration);
    return item;
  }
  item.kind = COUNTED;
  item.query = { namespace: domain, identifier, limit: rule.limit, duration: rule.duration, algorithm, cost: hits, charge };
  return item;
}

export function record(item: Item, d: Decision, now: number): void {
  const q = item.query!;
  item.allowed = d.allowed;
  item.remaining = d.remaining;
  item.degraded = d.degraded;
  // A fixed window ends exactly at the next multiple of its length; the Decision carries whole seconds.
  if (q.algorithm === FIXED_WINDOW) item.resetMs = windowEnd(now, q.duration);
  // A full concurrency key is over until its next slot frees (the oldest held lease's lapse),
  // not until its last lease lapses: a gateway that waits duration_until_reset retries then.
  else if (!d.allowed && q.algorithm === CONCURRENCY) item.resetMs = now + d.retryAfterMs;
  else item.resetMs = d.resetTime * 1000;
}

function windowEnd(now: number, seconds: number): number {
  const ms = seconds * 1000;
  return now - (now % ms) + ms;
}

export function statusOf(item: Item, now: number): RlsStatus {
  switch (item.kind) {
    case NO_RULE:
      return { code: CODE_OK };
    case UNLIMITED:
      return { code: CODE_OK, limit_remaining: UNLIMITED_REMAINING };
    default: {
      const rule = item.rule!;
      const current: RlsCurrentLimit = {};
      if (rule.name !== undefined && rule.name !== "") current.name = rule.name;
      if (rule.limit > 0) current.requests_per_unit = rule.limit;
      const unit = responseUnit(rule.unit);
      if (unit !== 0) current.unit = unit;
      const status: RlsStatus = { code: item.allowed ? CODE_OK : CODE_OVER_LIMIT, current_limit: current };
      if (item.allowed && item.remaining > 0) status.limit_remaining = item.remaining;
      const untilReset = Math.max(0, item.resetMs - now);
      status.duration_until_reset = { seconds: Math.floor(untilReset / 1000), nanos: (untilReset % 1000) * 1_000_000 };
      return status;
    }
  }
}

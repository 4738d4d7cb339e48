import type { AlgorithmName } from "../algorithms/registry.js";

/**
 * The operator's policy, as the decision pipeline reads it: the RLS domains of
 * envoyproxy/ratelimit's YAML files (docs/policy.md) and the overrides of POST /limit.
 * A Policy is an immutable value: a reload builds a new one and swaps it in one
 * assignment, so a decision never sees half of two policies.
 */
export interface Policy {
  /** short content hash of every file loaded (the same files give the same version on every member) */
  readonly version: string;
  /**
   * The rule of each descriptor of one RLS request, in request order: undefined where no
   * rule matches (or the domain is unknown), and where a matched rule was dropped by
   * another matched rule's `replaces`.
   */
  matchRequest(domain: string, descriptors: readonly RlsDescriptorEntries[]): (RlsMatch | undefined)[];
  /** how many override entries it holds: 0 lets the owner skip the lookup altogether */
  readonly overrideCount: number;
  /** The most specific override for an effective namespace and identifier, if any. */
  matchOverride(namespace: string, identifier: string): Override | undefined;
}

/** One descriptor's entries, in order. */
export type RlsDescriptorEntries = readonly { readonly key: string; readonly value: string }[];

/** The RLS units (envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit). */
export type RlsUnit = "second" | "minute" | "hour" | "day" | "week" | "month" | "year";

/** One `rate_limit` of a policy file, with what its descriptor node says about it. */
export interface RlsRule {
  /** `rate_limit.name`, when given */
  readonly name: string | undefined;
  /** `requests_per_unit`; 0 blocks everything */
  readonly limit: number;
  /** the window in seconds: the unit's length, or our `duration` extension */
  readonly duration: number;
  /** the unit as written; undefined when the rule gives a `duration` in seconds instead */
  readonly unit: RlsUnit | undefined;
  readonly algorithm: AlgorithmName;
  /** `unlimited: true`: OK, nothing counted, no current_limit */
  readonly unlimited: boolean;
  /** `shadow_mode`: decided and counted, but answered OK */
  readonly shadow: boolean;
  /** the names of the rules this one drops when both match one request (`replaces`); a loaded rule always has it */
  readonly replaces?: readonly string[];
  /** `count_blocked`: this rule's hits counted past the limit (true) or refused uncounted (false); undefined: RLS_COUNT_BLOCKED */
  readonly countBlocked?: boolean | undefined;
  /** `quota_mode`: OVER_LIMIT only when every quota-mode descriptor of the request is over; a loaded rule always has it */
  readonly quotaMode?: boolean;
  /** the descriptor's `metadata`: merged into the answer's dynamic_metadata when this descriptor passes (RESPONSE_DYNAMIC_METADATA) */
  readonly metadata?: { readonly [key: string]: MetadataValue } | undefined;
  /** the rule's path for metrics: `domain.key_value.key` (values only where detailed_metric/value_to_metric ask) */
  readonly metricKey: string;
}

export interface RlsMatch {
  readonly rule: RlsRule;
  /**
   * What the descriptor's count is stored under within its domain: its entries as
   * `key_value` joined, with a share_threshold wildcard's pattern in place of the value, so
   * values under one shared wildcard share one counter.
   */
  readonly counterKey: string;
  /** the metric key of this request (runtime values in it only where detailed_metric/value_to_metric ask) */
  readonly metricKey: string;
}

/** What an override of POST /limit sets (docs/policy.md, Overrides). */
export interface Override {
  /** the limit applied instead of the caller's; 0 blocks every request (a deny list) */
  readonly limit: number | undefined;
  /** seconds; undefined keeps the caller's */
  readonly duration: number | undefined;
  readonly algorithm: AlgorithmName | undefined;
  /** decided and counted as usual, but a request that would be blocked is let through */
  readonly shadow: boolean;
  /** which entry matched: `<file>#<index>`, for logs and answers' debugging */
  readonly source: string;
}

/** Plain data of a rule's `metadata` and of an RLS answer's dynamic_metadata (a google.protobuf.Struct). */
export type MetadataValue = null | boolean | number | string | readonly MetadataValue[] | { readonly [key: string]: MetadataValue };

import { Counter, type Registry } from "prom-client";
import { FastHistogram } from "../metrics/fast-histogram.js";

/** The per-rule statistics envoyproxy/ratelimit keeps, in the order of a rule's totals array. */
const STATS = ["total_hits", "over_limit", "near_limit", "within_limit", "shadow_mode"] as const;
const TOTAL_HITS = 0;
const OVER_LIMIT = 1;
const NEAR_LIMIT = 2;
const WITHIN_LIMIT = 3;
const SHADOW_MODE = 4;
/** envoyproxy/ratelimit's default NEAR_LIMIT_RATIO: a hit leaving the count past 80 % of the limit is near it */
export const NEAR_LIMIT_RATIO = 0.8;

/**
 * Rules tracked at most: metric keys come from the policy (values appear in them only where a
 * rule asks for detailed_metric/value_to_metric), so this bound is only reached by such a
 * rule seeing many values; past it the totals start over rather than grow without end.
 */
const MAX_RULES = 10_000;

interface RuleTotals {
  domain: string;
  rule: string;
  counts: Float64Array;
}

/**
 * Per-rule counters as operators of envoyproxy/ratelimit read them (docs/envoy.md, Metrics):
 * `ringlimit_rls_<stat>_total{domain, rule}` where rule is the rule's metric key
 * (`domain.key_value.key`). Hits are counted in plain arrays and read into prom-client only
 * when /metrics is rendered: a labelled inc() per descriptor would build a label key each time.
 */
export class RlsMetrics {
  private readonly rules = new Map<string, RuleTotals>();
  /** with ratelimitServiceNames: calls answered, calls failed, and their time (envoyproxy/ratelimit's service totals) */
  private calls = 0;
  private failures = 0;
  private readonly responseSeconds: FastHistogram | undefined;

  /**
   * `ratelimitServiceNames` (USE_PROMETHEUS): the same totals also as envoyproxy/ratelimit's
   * Prometheus names, those its default statsd mapper gives (src/stats/prom/default_mapper.yaml),
   * which Envoy Gateway's dashboards read: `ratelimit_service_rate_limit_<stat>{domain, key1,
   * key2}`, key1 and key2 the first two levels of the rule's metric key.
   */
  constructor(registry: Registry, ratelimitServiceNames = false) {
    const rules = this.rules;
    if (ratelimitServiceNames) {
      // The names envoyproxy/ratelimit's mapper gives ratelimit_server.ShouldRateLimit.total_requests,
      // .response_time and ratelimit.service.call.should_rate_limit.<err_type>: the dashboards' service panels.
      const method = { grpc_method: "ShouldRateLimit" };
      const self = this;
      new Counter({
        name: "ratelimit_service_total_requests",
        help: "ShouldRateLimit calls answered (gRPC and POST /json), envoyproxy/ratelimit's name",
        labelNames: ["grpc_method"],
        registers: [registry],
        collect() {
          this.reset();
          this.inc(method, self.calls);
        },
      });
      new Counter({
        name: "ratelimit_service_should_rate_limit_error",
        help: "ShouldRateLimit calls that failed (an invalid request, or an owner unreachable with FAIL_OPEN=false), envoyproxy/ratelimit's name",
        labelNames: ["err_type"],
        registers: [registry],
        collect() {
          this.reset();
          this.inc({ err_type: "service_error" }, self.failures);
        },
      });
      this.responseSeconds = new FastHistogram(
        "ratelimit_service_response_time_seconds",
        "Time from a ShouldRateLimit call's arrival at the service to its answer, envoyproxy/ratelimit's name",
        [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
        registry,
        method,
      );
      STATS.forEach((stat, i) => {
        new Counter({
          name: `ratelimit_service_rate_limit_${stat}`,
          help: HELP[stat],
          labelNames: ["domain", "key1", "key2"],
          registers: [registry],
          collect() {
            this.reset();
            for (const r of rules.values()) if (r.counts[i]! > 0) this.inc(mapperLabels(r.domain, r.rule), r.counts[i]!);
          },
        });
      });
    }
    STATS.forEach((stat, i) => {
      new Counter({
        name: `ringlimit_rls_${stat}_total`,
        help: HELP[stat],
        labelNames: ["domain", "rule"],
        registers: [registry],
        collect() {
          this.reset();
          for (const r of rules.values()) if (r.counts[i]! > 0) this.inc({ domain: r.domain, rule: r.rule }, r.counts[i]!);
        },
      });
    });
  }

  /**
   * `reply` itself without the service names; with them, `reply` behind a wrapper that counts
   * the call and its time (a closure per call only when USE_PROMETHEUS asks for these names).
   */
  timed<F, R>(reply: (failure: F | undefined, response: R | undefined) => void): (failure: F | undefined, response: R | undefined) => void {
    const histogram = this.responseSeconds;
    if (histogram === undefined) return reply;
    const started = performance.now();
    return (failure, response) => {
      this.calls++;
      if (failure !== undefined) this.failures++;
      histogram.observe((performance.now() - started) / 1000);
      reply(failure, response);
    };
  }

  /**
   * One counted descriptor: `hits` asked, `limit` and what remains after the decision.
   * `shadowed`: over, but answered OK because its rule (or the whole service) is in shadow mode.
   */
  count(domain: string, rule: string, hits: number, limit: number, over: boolean, remaining: number, shadowed: boolean): void {
    const c = this.totals(domain, rule);
    c[TOTAL_HITS] += hits;
    if (over) {
      c[OVER_LIMIT] += hits;
      if (shadowed) c[SHADOW_MODE] += hits;
    } else {
      c[WITHIN_LIMIT] += hits;
      // near: the count after these hits is past the ratio of the limit (envoyproxy/ratelimit's NEAR_LIMIT_RATIO)
      if (limit - remaining > Math.floor(limit * NEAR_LIMIT_RATIO)) c[NEAR_LIMIT] += hits;
    }
  }

  private totals(domain: string, rule: string): Float64Array {
    let r = this.rules.get(rule);
    if (r === undefined || r.domain !== domain) {
      if (this.rules.size >= MAX_RULES) this.rules.clear();
      r = { domain, rule, counts: new Float64Array(STATS.length) };
      this.rules.set(rule, r);
    }
    return r.counts;
  }
}

const HELP: Record<(typeof STATS)[number], string> = {
  total_hits: "RLS hits asked of a rule (each descriptor's hits_addend), by domain and rule",
  over_limit: "RLS hits over their rule's limit (answered OVER_LIMIT, or OK in shadow mode)",
  near_limit: "RLS hits within the limit that left the count past 80 % of it",
  within_limit: "RLS hits within their rule's limit",
  shadow_mode: "RLS hits over the limit answered OK because the rule or SHADOW_MODE is in shadow mode",
};

/**
 * The mapper's labels of a rule's metric key (`domain.key_value.key2_value…`): as the statsd
 * mapper splits `ratelimit.service.rate_limit.<domain>.<key1>[.<key2>…].<stat>` on dots, key1
 * and key2 are the first two levels (key2 only when there are two or more), deeper ones dropped.
 */
export function mapperLabels(domain: string, rule: string): { domain: string; key1: string; key2?: string } {
  const levels = (rule.startsWith(domain + ".") ? rule.slice(domain.length + 1) : rule).split(".");
  return levels.length > 1 ? { domain, key1: levels[0]!, key2: levels[1]! } : { domain, key1: levels[0]! };
}

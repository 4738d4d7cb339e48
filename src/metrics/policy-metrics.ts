import { Counter, Gauge, type Registry } from "prom-client";
import { pulledCounter } from "./pulled.js";

/**
 * Which policy this member runs, and how its loads went (docs/policy.md). Reloads are the
 * cold path: plain prom-client. A ring running two policies shows two `version` values.
 */
export class PolicyMetrics {
  private readonly info: Gauge<"version">;
  private readonly loads: Counter<"result">;
  private successes = 0;
  private errors = 0;

  /**
   * `ratelimitServiceNames` (USE_PROMETHEUS): the loads also as envoyproxy/ratelimit's
   * `ratelimit_service_config_load_success` and `_error`, the names its default statsd mapper
   * gives `ratelimit.service.config_load_success/error`.
   */
  constructor(registry: Registry, ratelimitServiceNames = false) {
    if (ratelimitServiceNames) {
      pulledCounter(registry, "ratelimit_service_config_load_success", "Policy loads that succeeded (envoyproxy/ratelimit's name)", () => this.successes);
      pulledCounter(
        registry,
        "ratelimit_service_config_load_error",
        "Policy loads that failed, the last good policy kept (envoyproxy/ratelimit's name)",
        () => this.errors,
      );
    }
    this.info = new Gauge({
      name: "ringlimit_policy_info",
      help: "1 for the version (short content hash) of the policy this member runs; none without POLICY_PATH",
      labelNames: ["version"],
      registers: [registry],
    });
    this.loads = new Counter({
      name: "ringlimit_policy_loads_total",
      help: "Loads of POLICY_PATH (start-up and reloads) by result; an error keeps the last good policy",
      labelNames: ["result"],
      registers: [registry],
    });
    this.loads.inc({ result: "success" }, 0);
    this.loads.inc({ result: "error" }, 0);
  }

  /** The policy in force is now `version`: the one series set to 1. */
  running(version: string): void {
    this.info.reset();
    this.info.set({ version }, 1);
  }

  loaded(): void {
    this.successes++;
    this.loads.inc({ result: "success" });
  }

  failed(): void {
    this.errors++;
    this.loads.inc({ result: "error" });
  }
}

/**
 * ringlimit_policy_version_mismatch: the ring's members whose heartbeats tell another policy
 * version than this node runs (docs/policy.md, One policy across the ring). Read when
 * /metrics is rendered; every clustered node exports it (0 when all agree).
 */
export function policyMismatchGauge(registry: Registry, mismatches: () => number): void {
  new Gauge({
    name: "ringlimit_policy_version_mismatch",
    help: "Members on this node's ring whose heartbeats tell another policy version than this node runs (POLICY_PATH); 0 when all agree",
    registers: [registry],
    collect() {
      this.set(mismatches());
    },
  });
}

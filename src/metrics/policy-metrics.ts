import { Counter, Gauge, type Registry } from "prom-client";

/**
 * Which policy this member runs, and how its loads went (docs/policy.md). Reloads are the
 * cold path: plain prom-client. A ring running two policies shows two `version` values.
 */
export class PolicyMetrics {
  private readonly info: Gauge<"version">;
  private readonly loads: Counter<"result">;
  constructor(registry: Registry) {
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
    this.loads.inc({ result: "success" });
  }

  failed(): void {
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

import { Counter, Gauge, Histogram, type Registry } from "prom-client";

/** Snapshot and replication metrics (docs/durability.md). Snapshots are the cold path: plain prom-client. */
export class DurabilityMetrics {
  readonly snapshotSeconds: Histogram;
  readonly snapshotBytes: Gauge;
  readonly snapshotKeys: Gauge;
  readonly snapshotFailures: Counter;
  readonly lastSnapshot: Gauge;
  readonly keysRestored: Counter;
  /** `snapshotIntervalSeconds`: SNAPSHOT_INTERVAL_MS in seconds, 0 when no snapshots are written (no STATE_DIR). */
  constructor(registry: Registry, snapshotIntervalSeconds: number) {
    this.snapshotSeconds = new Histogram({
      name: "ringlimit_snapshot_duration_seconds",
      help: "Time to write one snapshot to STATE_DIR, from the column copy to the directory fsync",
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    });
    this.snapshotBytes = new Gauge({ name: "ringlimit_snapshot_bytes", help: "Size of the last snapshot written", registers: [registry] });
    this.snapshotKeys = new Gauge({ name: "ringlimit_snapshot_keys", help: "States in the last snapshot written (owned and replica)", registers: [registry] });
    this.snapshotFailures = new Counter({
      name: "ringlimit_snapshot_failures_total",
      help: "Snapshot writes that failed (disk full, read-only, ...); the previous snapshot stays in place",
      registers: [registry],
    });
    this.lastSnapshot = new Gauge({
      name: "ringlimit_snapshot_last_success_timestamp_seconds",
      help: "Unix time of the last snapshot written whole",
      registers: [registry],
    });
    // Exported so that the stale-snapshot alert compares with the interval in force.
    new Gauge({
      name: "ringlimit_snapshot_interval_seconds",
      help: "SNAPSHOT_INTERVAL_MS in seconds: how often a snapshot is written to STATE_DIR (0: no STATE_DIR, no snapshots)",
      registers: [registry],
    }).set(snapshotIntervalSeconds);
    this.keysRestored = new Counter({ name: "ringlimit_keys_restored_total", help: "States loaded from STATE_DIR at start", registers: [registry] });
  }
}

import { Metrics } from "../../src/metrics/metrics.js";

/** Metrics of a node with nothing stored and nothing in flight: for tests that only count answers. */
export function emptyMetrics(): Metrics {
  return new Metrics({
    storedKeys: () => 0,
    storedBytes: () => 0,
    maxStoredBytes: 0,
    maxKeys: 0,
    maxNamespaces: 0,
    evictions: () => 0,
    expirations: () => 0,
    requestsInFlight: () => 0,
  });
}

/**
 * What bench/run.mjs reads of /metrics (bench/lib/metrics-text.mjs): named metrics summed over
 * their label sets, and ringlimit_forwarded_total without its outcome "shared" (answers from a
 * share, never sent), so the `fwd` column counts what crossed to another node.
 */
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import t from "tap";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
const { sumMetrics } = (await import(pathToFileURL(path.join(ROOT, "bench/lib/metrics-text.mjs")).href)) as {
  sumMetrics: (text: string, names: string[], sums?: Record<string, number>) => Record<string, number>;
};

const TEXT = [
  "# HELP ringlimit_forwarded_total Decisions of keys another member owns",
  "# TYPE ringlimit_forwarded_total counter",
  'ringlimit_forwarded_total{outcome="answered"} 120',
  'ringlimit_forwarded_total{outcome="shared"} 400',
  'ringlimit_forwarded_total{outcome="timeout"} 3',
  'ringlimit_degraded_total{reason="peer_unavailable"} 2',
  'ringlimit_degraded_total{reason="no_quorum"} 1',
  "ringlimit_stored_keys 5000",
  "ringlimit_stored_keys_other 7",
  "ringlimit_evictions_total 0",
  "",
].join("\n");

t.test("forwarded counts what was sent, not the answers from shares; the rest summed over labels", async (t) => {
  const sums = sumMetrics(TEXT, ["ringlimit_forwarded_total", "ringlimit_degraded_total", "ringlimit_stored_keys", "ringlimit_evictions_total"]);
  t.same(sums, { ringlimit_forwarded_total: 123, ringlimit_degraded_total: 3, ringlimit_stored_keys: 5000, ringlimit_evictions_total: 0 });
});

t.test("summed across nodes into one record; names not asked for and comments are left out", async (t) => {
  const sums = sumMetrics(TEXT, ["ringlimit_forwarded_total"]);
  sumMetrics(TEXT, ["ringlimit_forwarded_total"], sums);
  t.same(sums, { ringlimit_forwarded_total: 246 }, "two nodes' texts");
  t.same(sumMetrics("# only comments\n", ["ringlimit_stored_keys"]), {});
});

/**
 * The settings alerts compare with are exported by the node itself (src/metrics/metrics.ts,
 * durability-metrics.ts): ringlimit_max_keys is MAX_KEYS, ringlimit_snapshot_interval_seconds
 * is SNAPSHOT_INTERVAL_MS with STATE_DIR and 0 without, so a rule needs no copy of either.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { DEFAULTS } from "../../src/config.js";
import { closeAgents, request } from "../harness/http-client.js";
import { startTestNode } from "../harness/in-process-node.js";

t.teardown(closeAgents);

async function gauges(url: string): Promise<Record<string, number>> {
  const text = (await request(url + "/metrics")).text;
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
  return { maxKeys: value("ringlimit_max_keys"), interval: value("ringlimit_snapshot_interval_seconds") };
}

t.test("MAX_KEYS, and no snapshots without STATE_DIR", async (t) => {
  const node = await startTestNode({ MAX_KEYS: "1234", SNAPSHOT_INTERVAL_MS: "2500" });
  t.teardown(() => node.stop());
  t.same(await gauges(node.url), { maxKeys: 1234, interval: 0 });
});

t.test("the default MAX_KEYS, and SNAPSHOT_INTERVAL_MS in seconds with STATE_DIR", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "settings-gauges-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const node = await startTestNode({ STATE_DIR: dir, SNAPSHOT_INTERVAL_MS: "2500" });
  t.teardown(() => node.stop());
  t.same(await gauges(node.url), { maxKeys: DEFAULTS.maxKeys, interval: 2.5 });
});

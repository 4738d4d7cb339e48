/**
 * The side-by-side rows of bench/run.mjs (issue 39): each cluster row is divided by the
 * one-node row of its own server on the same limit and window, every gubernator row asks for
 * the keys, limit and window of a ringlimit row, and the printed comparison puts ours and
 * gubernator's for one limit on one line. The bench's own modules, loaded as they run.
 */
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import t from "tap";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
const load = (file: string) => import(pathToFileURL(path.join(ROOT, "bench/lib", file)).href);

interface Scenario {
  name: string;
  server: { kind: string; nodes?: number };
  body: { namespace: string; limit: number; duration: number; idSpace: number; format?: string; path?: string };
  oneNode?: string;
  all200?: boolean;
}

t.test("a cluster row's one-node row is the same server on one node, same limit and window", async (t) => {
  const { SCENARIOS } = (await load("scenarios.mjs")) as { SCENARIOS: Scenario[] };
  const clusters = SCENARIOS.filter((s) => s.oneNode);
  t.ok(clusters.length >= 4, `${clusters.length} cluster rows name their one node`);
  for (const c of clusters) {
    const one = SCENARIOS.find((s) => s.name === c.oneNode);
    t.ok(one, `${c.name}: ${c.oneNode} exists`);
    if (!one) continue;
    t.equal(one.server.kind, c.server.kind, `${c.name}: same server`);
    t.equal(one.server.nodes ?? 1, 1, `${c.name}: ${one.name} is one node`);
    t.ok((c.server.nodes ?? 1) > 1, `${c.name} is a cluster`);
    t.same([one.body.limit, one.body.duration], [c.body.limit, c.body.duration], `${c.name}: same limit and window`);
    t.ok(c.all200 && one.all200, `${c.name} and ${one.name} are checked all-200`);
  }
});

t.test("every gubernator row asks what a ringlimit row asks, through gubernator's JSON door", async (t) => {
  const { SCENARIOS } = (await load("scenarios.mjs")) as { SCENARIOS: Scenario[] };
  const { bodyParts } = await load("bodies.mjs");
  const guber = SCENARIOS.filter((s) => s.server.kind === "gubernator");
  t.equal(guber.length, 4, "one node and three, at limit 100 and 1,000,000");
  for (const g of guber) {
    const twin = SCENARIOS.find(
      (s) =>
        s.server.kind === "ringlimit" &&
        (s.server.nodes ?? 1) === (g.server.nodes ?? 1) &&
        s.body.limit === g.body.limit &&
        s.body.duration === g.body.duration &&
        s.body.idSpace === g.body.idSpace &&
        s.body.namespace === g.body.namespace,
    );
    t.ok(twin, `${g.name}: a ringlimit row with the same nodes, keys, limit and window (${twin?.name})`);
    t.equal(g.body.path, "/v1/GetRateLimits");
    const [head, tail] = bodyParts({ ...g.body, idPrefix: "p" });
    const sent = JSON.parse(head + "user-7" + tail);
    t.same(
      sent,
      { requests: [{ name: g.body.namespace, unique_key: "user-7", hits: 1, limit: g.body.limit, duration: g.body.duration * 1000 }] },
      `${g.name}: one request per call, the window in milliseconds`,
    );
  }
  // Ours, for comparison: the same namespace, identifier, limit and window in seconds.
  const [head, tail] = bodyParts({ namespace: "bench", limit: 100, duration: 1, idSpace: 1, idPrefix: "p" });
  t.same(JSON.parse(head + "user-7" + tail), { namespace: "bench", identifier: "user-7", limit: 100, duration: 1 });
});

t.test("the comparison line: each limit's clusters over their own one node, side by side", async (t) => {
  const { clusterRatios } = await load("report.mjs");
  const row = (name: string, limit: number, oneNode: string | undefined, vsOneNode: number | null) => ({
    name,
    scenario: { name, oneNode, body: { limit } },
    vsOneNode,
  });
  const lines: string[] = clusterRatios([
    row("ringlimit-allowed-100", 100, undefined, null),
    row("ringlimit-service3-100", 100, "ringlimit-allowed-100", 3.72),
    row("gubernator-service3-100", 100, "gubernator-1node-100", 1.6),
    row("ringlimit-service3", 1_000_000, "ringlimit-allowed", 1.99),
    row("gubernator-service3", 1_000_000, "gubernator-1node", null),
  ]);
  t.same(lines, [
    "cluster ÷ its own one node, CPU µs per decision (same run):",
    "  limit 100: ringlimit-service3-100 ÷ ringlimit-allowed-100 = 3.72×   gubernator-service3-100 ÷ gubernator-1node-100 = 1.60×",
    "  limit 1,000,000: ringlimit-service3 ÷ ringlimit-allowed = 1.99×",
  ]);
  t.same(clusterRatios([row("floor", 1, undefined, null)]), [], "no line when no cluster row ran");
});

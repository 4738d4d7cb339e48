/**
 * One policy across the ring (docs/policy.md), on 3 real node processes, each with its own
 * POLICY_PATH: members tell their policy version with every heartbeat, GET /cluster lists
 * each member's `policy_version`, a member running another version is logged once per change
 * and counted in ringlimit_policy_version_mismatch, and a key is decided under its owner's
 * policy whichever member it came in by.
 */
import { mkdtempSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { AUTH_HEADER, closeAgents, request } from "../../../harness/http-client.js";
import { hit, metric, startCluster } from "../../../harness/cluster.js";
import { until } from "../../../harness/wait.js";
import { compilePolicy } from "../../../../src/policy/index.js";

t.teardown(closeAgents);

const BASE = 'overrides:\n  - {namespace: test, identifier: "vip-*", limit: 40}\n';
const RAISED = 'overrides:\n  - {namespace: test, identifier: "vip-*", limit: 90}\n';
const versionOf = (text: string) => compilePolicy([{ path: "policy.yaml", name: "policy.yaml", text }]).version;

/** Replace the file as an editor or a ConfigMap swap does: a new file renamed over the old. */
function writePolicy(dir: string, text: string): void {
  const tmp = path.join(dir, ".policy.yaml.tmp");
  writeFileSync(tmp, text);
  renameSync(tmp, path.join(dir, "policy.yaml"));
}

t.test("3 nodes: versions exchanged with the heartbeat, listed, logged once and counted when they differ", async (t) => {
  const dirs = [0, 1, 2].map((i) => mkdtempSync(path.join(tmpdir(), `ringlimit-policy-${i}-`)));
  for (const dir of dirs) writePolicy(dir, BASE);
  const cluster = await startCluster(3, { LOG_LEVEL: "info" }, (i) => ({ POLICY_PATH: dirs[i]! }));
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes.map((n) => n!);
  const members = cluster.members;
  const listed = async (i: number) => {
    const r = await request(nodes[i]!.url + "/cluster", { headers: AUTH_HEADER });
    return Object.fromEntries((r.json.data.members as { id: string; policy_version: string | null }[]).map((m) => [m.id, m.policy_version]));
  };
  const base = versionOf(BASE);
  const raised = versionOf(RAISED);

  await until("every member lists every member's version", async () => {
    for (let i = 0; i < 3; i++) {
      const seen = await listed(i);
      if (members.some((m) => seen[m] !== base)) return false;
    }
    return true;
  });
  for (let i = 0; i < 3; i++) t.equal(await metric(nodes[i]!, "ringlimit_policy_version_mismatch"), 0, `node ${i}: all agree`);

  // Node 2 alone runs a new version: each key is decided under its owner's policy.
  writePolicy(dirs[2]!, RAISED);
  await until("node 0 hears node 2's new version", async () => (await listed(0))[members[2]!] === raised);
  t.same(await listed(0), { [members[0]!]: base, [members[1]!]: base, [members[2]!]: raised }, "GET /cluster lists each member's policy_version");
  t.equal(await metric(nodes[0]!, "ringlimit_policy_version_mismatch"), 1, "node 0: one member differs");
  await until("node 2 counts both others", async () => (await metric(nodes[2]!, "ringlimit_policy_version_mismatch")) === 2);
  const ownedBy2 = cluster.identifierOwnedBy(2, "vip");
  const ownedBy1 = cluster.identifierOwnedBy(1, "vip");
  t.equal((await hit(nodes[0]!, ownedBy2, 5, { cost: 0 })).json.data.limit, 90, "a key of node 2: node 2's policy, asked at node 0");
  t.equal((await hit(nodes[2]!, ownedBy1, 5, { cost: 0 })).json.data.limit, 40, "a key of node 1: node 1's policy, asked at node 2");

  // Heartbeats keep coming; the difference is logged once per change, not per beat.
  await new Promise((r) => setTimeout(r, 1000));
  const warnings = (i: number) =>
    nodes[i]!.output()
      .split("\n")
      .filter((l) => l.includes(`runs policy ${raised}, this node ${base}`)).length;
  t.equal(warnings(0), 1, "node 0 logged node 2's version once");
  const ownWarnings = nodes[2]!
    .output()
    .split("\n")
    .filter((l) => l.includes(`this node now runs policy ${raised}; 2 member(s) run another`)).length;
  t.equal(ownWarnings, 1, "node 2 logged once that the others differ");

  // Back in step: the gauge falls to 0 everywhere.
  writePolicy(dirs[2]!, BASE);
  await until("all agree again", async () => {
    const gauges = await Promise.all(nodes.map((n) => metric(n, "ringlimit_policy_version_mismatch")));
    return gauges.every((g) => g === 0);
  });
  t.match(nodes[0]!.output(), new RegExp(`runs this node.s policy ${base} again`), "node 0 logged the return (info)");
  t.equal(warnings(0), 1, "and no further warning");
});

/**
 * An override lands by editing a file while a 3-node cluster is under load (issue 20 item
 * 5): no restart, no count lost. Every node watches the same POLICY_PATH folder; the limit of
 * `vip-*` is raised from 50 to 80 mid-load by renaming a new file over the old one. Each key
 * is decided on its owner, so whatever moment each member sees the edit, every key admits
 * exactly 80 in all (the 50 or fewer counted before stay counted) and its allowed answers
 * carry the counts 1..80 once each. PATIENT_PEERS: exact counts, no wall-clock deadline.
 */
import { mkdtempSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { AUTH_HEADER, closeAgents, request, type Reply } from "../harness/http-client.js";
import { hit, startCluster } from "../harness/cluster.js";
import { until } from "../harness/wait.js";
import { compilePolicy } from "../../src/policy/index.js";

t.teardown(closeAgents);

const text = (limit: number) => `overrides:\n  - {namespace: test, identifier: "vip-*", limit: ${limit}, duration: 31536000}\n`;
const versionOf = (limit: number) => compilePolicy([{ path: "p", name: "overrides.yaml", text: text(limit) }]).version;

t.test("3 nodes under load: a raised limit lands from a file edit, no restart, no count lost", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-live-"));
  const write = (limit: number) => {
    writeFileSync(path.join(dir, ".next"), text(limit));
    renameSync(path.join(dir, ".next"), path.join(dir, "overrides.yaml"));
  };
  write(50);
  const cluster = await startCluster(3, { POLICY_PATH: dir });
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes.map((n) => n!);
  const pids = nodes.map((n) => n.pid);
  const keys = [0, 1, 2].flatMap((owner) => [cluster.identifierOwnedBy(owner, "vip-a"), cluster.identifierOwnedBy(owner, "vip-b")]);
  const answers = new Map<string, Reply[]>(keys.map((k) => [k, []]));

  // The load: 12 callers, each sending requests for the keys in turn, to every node, until stopped.
  let stop = false;
  let sent = 0;
  const callers = Array.from({ length: 12 }, async (_, c) => {
    for (let i = c; !stop; i += 12) {
      const key = keys[i % keys.length]!;
      const r = await hit(nodes[i % 3]!, key, 1000, { duration: 31536000 });
      answers.get(key)!.push(r);
      sent++;
    }
  });
  await until("some load before the edit", () => sent >= 300, 60_000);
  write(80);
  const raised = versionOf(80);
  await until(
    "every member runs the new version",
    async () => {
      const r = await request(nodes[0]!.url + "/cluster", { headers: AUTH_HEADER });
      return (r.json.data.members as { policy_version: string }[]).every((m) => m.policy_version === raised);
    },
    30_000,
  );
  const atEdit = sent;
  await until("as much load after the edit", () => sent >= atEdit + 900, 90_000);
  stop = true;
  await Promise.all(callers);

  t.same(
    nodes.map((n) => n.pid),
    pids,
    "no node restarted",
  );
  for (const node of nodes) t.equal(node.child.exitCode, null, "still running");
  for (const key of keys) {
    const replies = answers.get(key)!;
    t.same(
      replies.filter((r) => r.status !== 200 && r.status !== 429).map((r) => r.status),
      [],
      `${key}: only 200 and 429`,
    );
    t.equal(replies.filter((r) => r.json?.data?.degraded === true).length, 0, `${key}: nothing degraded`);
    const allowed = replies.filter((r) => r.status === 200);
    t.equal(allowed.length, 80, `${key}: exactly the raised limit admitted in all`);
    t.same(
      allowed.map((r) => r.json.data.count as number).sort((a, b) => a - b),
      Array.from({ length: 80 }, (_, i) => i + 1),
      `${key}: counts 1..80 once each`,
    );
    t.ok(replies.some((r) => r.json.data.limit === 50) && replies.some((r) => r.json.data.limit === 80), `${key}: answered under both limits`);
  }
});

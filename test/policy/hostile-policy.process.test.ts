/**
 * Issue #33, hostile policy files: an alias bomb (999 aliases of a 20,000-descriptor list),
 * 100,000 descriptors, a 30,000-key mapping, 100,000 nested `[`, and a file replaced by an
 * empty folder. At start-up each stops the node (exit 2) with one line naming the file and
 * the bound; as a live edit each is refused with a warning and a metric while the old policy
 * stays in force and /health keeps answering. A valid file of 999 aliases, edited live on a
 * 3-node ring, is compiled off the event loop: no member drops another.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { metric } from "../harness/cluster.js";
import { post, TEST_KEY } from "../harness/http-client.js";
import { runMain } from "../harness/run-main.js";
import { eventually } from "../harness/wait.js";
import { beside, startRlsCluster, startRlsNode } from "../rls/hostile/harness.js";

const GOOD = "domain: shop\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 3 }\n";

/** 999 aliases of one list of `n` descriptors (each with a rule when `rules`) */
function aliased(domain: string, n: number, rules: boolean): string {
  let text = `domain: ${domain}\ndescriptors:\n  - key: base\n    descriptors: &l\n`;
  for (let i = 0; i < n; i++) text += `      - key: k${i}\n` + (rules ? `        rate_limit: { unit: minute, requests_per_unit: 10 }\n` : "");
  for (let i = 0; i < 999; i++) text += `  - key: a${i}\n    descriptors: *l\n`;
  return text;
}

const HOSTILE: [what: string, text: () => string, bound: RegExp][] = [
  ["999 aliases of a 20,000-descriptor list", () => aliased("bomb", 20_000, false), /more than 10000 descriptors|more than 500000 YAML nodes/],
  [
    "100,000 descriptors",
    () => "domain: big\ndescriptors:\n" + Array.from({ length: 100_000 }, (_, i) => `- {key: k, value: v${i}}\n`).join(""),
    /more than 10000 descriptors|needs more than 256 MB of heap/,
  ],
  [
    "a 30,000-key mapping",
    () => "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n" + Array.from({ length: 30_000 }, (_, i) => `      x${i}: 1\n`).join(""),
    /more than 1000 keys/,
  ],
  ["100,000 nested [", () => "domain: d\ndescriptors: " + "[".repeat(100_000) + "]".repeat(100_000) + "\n", /more than 256 nested/],
];

function tempDir(t: Test): string {
  const dir = mkdtempSync(path.join(tmpdir(), "hostile-policy-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Written beside and renamed over, as editors and kubelet do. */
function replace(file: string, text: string): void {
  writeFileSync(file + ".tmp", text);
  renameSync(file + ".tmp", file);
}

t.test("at start-up, each hostile file stops the node with exit 2 and one line naming the file and the bound", async (t) => {
  const dir = tempDir(t);
  for (const [what, text, bound] of HOSTILE) {
    const file = path.join(dir, `${what.replace(/\W+/g, "-")}.yaml`);
    writeFileSync(file, text());
    const started = Date.now();
    const run = await runMain([], { HOST: "127.0.0.1", PORT: "0", API_KEYS: TEST_KEY, POLICY_PATH: file });
    t.equal(run.code, 2, `${what}: exit 2 after ${Date.now() - started} ms`);
    t.match(run.stderr, file + ": ", `${what}: names the file`);
    t.match(run.stderr, bound, `${what}: names the bound: ${run.stderr.trim()}`);
  }
});

t.test("as a live edit, each hostile file is refused: old policy kept, a warning, a metric, /health answering", async (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, "policy.yaml");
  writeFileSync(file, GOOD);
  const { node } = await startRlsNode(t, { POLICY_PATH: file });
  const version = async () => (await post(node.url, "/json", { domain: "shop", descriptors: [{ entries: [{ key: "user", value: "u" }] }] })).json;
  for (const [what, text, bound] of HOSTILE) {
    // One rename may be read twice (two watch events): the test waits for this file's warning,
    // read from what the node wrote since, not for a count of failed loads.
    const from = node.output().length;
    const failedBefore = (await metric(node, "ringlimit_policy_loads_total", '{result="error"}')) ?? 0;
    const { beside: b } = await beside([node], async () => {
      replace(file, text());
      return eventually(async () => bound.test(node.output().slice(from)), 60_000);
    });
    t.ok(b.median < 50, `${what}: /health median ${b.median.toFixed(1)} ms while it was read`);
    t.ok((await metric(node, "ringlimit_policy_loads_total", '{result="error"}'))! > failedBefore, `${what}: counted as a failed load`);
    t.match(node.output().slice(from), bound, `${what}: the warning names the bound`);
    const answer = (await version()) as { statuses: { currentLimit: { requestsPerUnit: number } }[] };
    t.equal(answer.statuses[0]!.currentLimit.requestsPerUnit, 3, `${what}: the old policy stays in force`);
  }
  t.equal(node.child.exitCode, null, "the node is alive");

  t.test("the file replaced by an empty folder: refused, the rules stay", async (t) => {
    const before = await metric(node, "ringlimit_policy_loads_total", '{result="error"}');
    rmSync(file);
    mkdirSync(file);
    // (a reload between the removal and the mkdir may first refuse a missing file)
    t.ok(await eventually(() => /was a file at start-up and is now a folder/.test(node.output()), 15_000), "refused with a warning");
    t.ok((await metric(node, "ringlimit_policy_loads_total", '{result="error"}'))! > before!, "counted");
    const answer = (await version()) as { statuses: { currentLimit: { requestsPerUnit: number } }[] };
    t.equal(answer.statuses[0]!.currentLimit.requestsPerUnit, 3, "the old policy stays in force");
  });
});

t.test("a valid file of 999 aliases, edited live on a 3-node ring: compiled off the loop, no member dropped", async (t) => {
  const dir = tempDir(t);
  const files = [0, 1, 2].map((i) => path.join(dir, `p${i}.yaml`));
  files.forEach((f) => writeFileSync(f, GOOD));
  const { cluster } = await startRlsCluster(t, 3, {});
  // each member its own file (one ConfigMap per pod): restart them on it
  for (let i = 0; i < 3; i++) cluster.env[i]!.POLICY_PATH = files[i]!;
  for (let i = 0; i < 3; i++) await cluster.restart(i);
  const nodes = cluster.nodes.map((n) => n!);
  const ask = (i: number) =>
    post(nodes[i]!.url, "/json", {
      domain: "aliased",
      descriptors: [
        {
          entries: [
            { key: "a500", value: "x" },
            { key: "k3", value: "y" },
          ],
        },
      ],
    });
  const text = aliased("aliased", 8, true);
  const { result, beside: b } = await beside(nodes, async () => {
    files.forEach((f) => replace(f, text));
    return Promise.all(nodes.map((_, i) => eventually(async () => (await ask(i)).json?.statuses?.[0]?.currentLimit?.requestsPerUnit === 10, 60_000)));
  });
  t.same(result, [true, true, true], "every member runs the new policy");
  t.equal(b.fewestMembers, 3, "no member dropped another");
  t.ok(b.median < 50, `/health median ${b.median.toFixed(1)} ms on the three nodes while they compiled`);
});

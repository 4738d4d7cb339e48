/**
 * PolicyWatcher against real files on disk: an edit, an added and a removed file take
 * effect within a few seconds; a broken edit is kept out (logged once, counted) and the
 * last good policy stays; a Kubernetes ConfigMap's `..data` symlink swap is seen; a FIFO
 * or an oversized file is refused without hanging; stop() ends all of it.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { Registry } from "prom-client";
import t, { type Test } from "tap";
import { PolicyMetrics } from "../../src/metrics/policy-metrics.js";
import { loadPolicy, MAX_POLICY_FILE_BYTES, PolicyWatcher, type Policy } from "../../src/policy/index.js";
import { eventually } from "../harness/wait.js";

const override = (limit: number, namespace = "checkout") => `overrides:\n  - namespace: ${namespace}\n    limit: ${limit}\n`;

interface Rig {
  dir: string;
  watcher: PolicyWatcher;
  /** the policy the owner holds: what onChange handed over last */
  held: () => Policy;
  changes: () => number;
  lines: string[];
  loads: (result: "success" | "error") => Promise<number>;
  info: () => Promise<string>;
}

function rig(t: Test, setup: (dir: string) => string): Rig {
  const dir = mkdtempSync(path.join(tmpdir(), "policy-watch-"));
  const policyPath = setup(dir);
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).trim().split("\n"));
      done();
    },
  });
  const registry = new Registry();
  let held = loadPolicy(policyPath);
  let changes = 0;
  const watcher = new PolicyWatcher({
    path: policyPath,
    initial: held,
    onChange: (policy) => {
      held = policy;
      changes++;
    },
    logger: pino({ level: "info" }, sink),
    metrics: new PolicyMetrics(registry),
    intervalMs: 200,
  });
  watcher.start();
  t.teardown(() => {
    watcher.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const value = async (name: string, labels: Record<string, string>) =>
    (await registry.getSingleMetric(name)!.get()).values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? 0;
  return {
    dir,
    watcher,
    held: () => held,
    changes: () => changes,
    lines,
    loads: (result) => value("ringlimit_policy_loads_total", { result }),
    info: async () =>
      (await registry.getSingleMetric("ringlimit_policy_info")!.get()).values
        .filter((v) => v.value === 1)
        .map((v) => v.labels.version)
        .join(","),
  };
}

const limitOf = (policy: Policy, namespace = "checkout") => policy.matchOverride(namespace, "anyone")?.limit;

t.test("an edit, an added file and a removed file take effect within a few seconds", async (t) => {
  const r = rig(t, (dir) => {
    writeFileSync(path.join(dir, "a.yaml"), override(10));
    return dir;
  });
  t.equal(limitOf(r.held()), 10);
  t.equal(await r.info(), r.held().version, "the info metric names the version in force");
  t.equal(await r.loads("success"), 1, "the start-up load counts");

  writeFileSync(path.join(r.dir, "a.yaml"), override(20));
  t.ok(await eventually(() => limitOf(r.held()) === 20, 15_000), "edited");
  const edited = r.held().version;
  t.equal(r.watcher.policy, r.held(), "the watcher and the owner hold the same policy");

  writeFileSync(path.join(r.dir, "b.yaml"), override(30, "search"));
  t.ok(await eventually(() => limitOf(r.held(), "search") === 30, 15_000), "added");
  t.equal(limitOf(r.held()), 20, "the other file still counts");

  unlinkSync(path.join(r.dir, "b.yaml"));
  t.ok(await eventually(() => limitOf(r.held(), "search") === undefined, 15_000), "removed");
  t.equal(r.held().version, edited, "the same files give the same version again");
  t.equal(await r.info(), edited);
  t.equal(await r.loads("error"), 0);
  t.ok(
    r.lines.some((l) => l.includes(`policy ${edited} in force`)),
    "a reload is logged",
  );
});

t.test("a broken edit is kept out: logged once, counted once, the last good policy stays", async (t) => {
  const r = rig(t, (dir) => {
    writeFileSync(path.join(dir, "a.yaml"), override(10));
    return dir;
  });
  const good = r.held().version;
  writeFileSync(path.join(r.dir, "a.yaml"), override(10).replace("limit", "limt"));
  t.ok(await eventually(async () => (await r.loads("error")) === 1, 15_000), "counted");
  await new Promise((resolve) => setTimeout(resolve, 1000)); // five more checks
  t.equal(await r.loads("error"), 1, "counted once while the file stays broken");
  const warnings = r.lines.filter((l) => l.includes("policy not reloaded"));
  t.equal(warnings.length, 1, "logged once");
  t.match(warnings[0], `policy not reloaded, ${good} stays in force: ${path.join(r.dir, "a.yaml")}: line 3: unknown key 'limt' in override #0`);
  t.equal(r.held().version, good);
  t.equal(limitOf(r.held()), 10, "the last good policy is in force");
  t.equal(await r.watcher.reload(), "refused", "asked again: still refused, not re-counted");
  t.equal(await r.loads("error"), 1);

  writeFileSync(path.join(r.dir, "a.yaml"), override(15));
  t.ok(await eventually(() => limitOf(r.held()) === 15, 15_000), "a fixed file loads");
});

t.test("a ConfigMap's symlink swap (kubelet's ..data rename) is seen", async (t) => {
  const r = rig(t, (dir) => {
    mkdirSync(path.join(dir, "..2026_11_25_10_00_00.1"));
    writeFileSync(path.join(dir, "..2026_11_25_10_00_00.1", "policy.yaml"), override(10));
    symlinkSync("..2026_11_25_10_00_00.1", path.join(dir, "..data"));
    symlinkSync("..data/policy.yaml", path.join(dir, "policy.yaml"));
    return dir;
  });
  t.equal(limitOf(r.held()), 10);
  // What kubelet does: write the new version's folder, point a temporary link at it, rename the link over ..data.
  mkdirSync(path.join(r.dir, "..2026_11_25_10_05_00.2"));
  writeFileSync(path.join(r.dir, "..2026_11_25_10_05_00.2", "policy.yaml"), override(99));
  symlinkSync("..2026_11_25_10_05_00.2", path.join(r.dir, "..data_tmp"));
  renameSync(path.join(r.dir, "..data_tmp"), path.join(r.dir, "..data"));
  rmSync(path.join(r.dir, "..2026_11_25_10_00_00.1"), { recursive: true });
  t.ok(await eventually(() => limitOf(r.held()) === 99, 15_000), "the new version is in force");
  t.equal(r.changes(), 1, "handed over once");
});

t.test("a file named directly, replaced by rename as editors save, is reloaded", async (t) => {
  const r = rig(t, (dir) => {
    writeFileSync(path.join(dir, "policy.yaml"), override(10));
    return path.join(dir, "policy.yaml");
  });
  writeFileSync(path.join(r.dir, "policy.yaml.swp"), override(11));
  renameSync(path.join(r.dir, "policy.yaml.swp"), path.join(r.dir, "policy.yaml"));
  t.ok(await eventually(() => limitOf(r.held()) === 11, 15_000));
});

t.test("a FIFO or an oversized file appearing is refused without hanging; the policy stays", async (t) => {
  const r = rig(t, (dir) => {
    writeFileSync(path.join(dir, "a.yaml"), override(10));
    return dir;
  });
  execFileSync("mkfifo", [path.join(r.dir, "pipe.yaml")]);
  t.ok(await eventually(async () => (await r.loads("error")) === 1, 5000), "the FIFO is refused");
  t.ok(r.lines.some((l) => l.includes("pipe.yaml: is not a regular file (a FIFO)")));
  unlinkSync(path.join(r.dir, "pipe.yaml"));
  writeFileSync(path.join(r.dir, "big.yaml"), "#" + "x".repeat(MAX_POLICY_FILE_BYTES));
  t.ok(await eventually(async () => (await r.loads("error")) === 2, 5000), "the oversized file is refused");
  t.ok(r.lines.some((l) => l.includes(`big.yaml: is ${MAX_POLICY_FILE_BYTES + 1} bytes`)));
  t.equal(limitOf(r.held()), 10, "the last good policy is in force all along");
  t.equal(r.changes(), 0);
});

t.test("after stop(), changes are not read", async (t) => {
  const r = rig(t, (dir) => {
    writeFileSync(path.join(dir, "a.yaml"), override(10));
    return dir;
  });
  r.watcher.stop();
  writeFileSync(path.join(r.dir, "a.yaml"), override(20));
  await new Promise((resolve) => setTimeout(resolve, 800));
  t.equal(r.changes(), 0);
  t.equal(await r.watcher.reload(), "unchanged");
});

/**
 * scripts/build-if-stale.mjs, which `npm run cluster` runs first: `npm run build` only when
 * dist/ is missing or older than src/ (or a file that steers the build), run for real in a
 * scratch folder. The npm it runs is the one npm_execpath names, as under `npm run`; here that
 * is a small script that records `run build` and writes dist/.tsbuildinfo as tspc does, since
 * npm's own start-up (many seconds on a loaded machine) is not what is tested.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";

const SCRIPT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../scripts/build-if-stale.mjs");

/** A scratch package whose "npm" records each `run build` in builds.log and exits with `status`. */
function scratch(
  t: { teardown(fn: () => void): void },
  status = 0,
  buildMs = 0,
): { dir: string; run: (env?: Record<string, string>) => { status: number | null; stderr: string } } {
  const dir = mkdtempSync(path.join(tmpdir(), "build-if-stale-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const npm = path.join(dir, "npm-cli.cjs");
  writeFileSync(
    npm,
    `const fs = require("fs");
if (process.argv.slice(2).join(" ") !== "run build") process.exit(9);
const until = Date.now() + ${buildMs};
while (Date.now() < until) {}
fs.appendFileSync("builds.log", "x\\n");
if (${status} !== 0) process.exit(${status});
fs.mkdirSync("dist", { recursive: true });
fs.writeFileSync("dist/.tsbuildinfo", "{}");
`,
  );
  mkdirSync(path.join(dir, "src/a"), { recursive: true });
  writeFileSync(path.join(dir, "src/a/x.ts"), "export const x = 1;\n");
  writeFileSync(path.join(dir, "package.json"), "{}");
  const run = (env: Record<string, string> = {}) => {
    const r = spawnSync(process.execPath, [SCRIPT], { cwd: dir, encoding: "utf8", env: { PATH: process.env.PATH ?? "", npm_execpath: npm, ...env } });
    return { status: r.status, stderr: r.stderr };
  };
  return { dir, run };
}

t.test("builds when dist/ is missing or older than its sources, and only then", async (t) => {
  const { dir, run } = scratch(t);
  const builds = () => {
    try {
      return readFileSync(path.join(dir, "builds.log"), "utf8").split("\n").length - 1;
    } catch {
      return 0;
    }
  };
  // Times set explicitly, one minute apart: no test depends on how fine the clock or the
  // file system's timestamps are.
  const at = (file: string, secondsAgo: number) => {
    const when = new Date(Date.now() - secondsAgo * 1000);
    utimesSync(path.join(dir, file), when, when);
  };

  let r = run();
  t.equal(r.status, 0);
  t.match(r.stderr, /dist\/ is missing: building/);
  t.equal(builds(), 1, "no dist/: one build");

  r = run();
  t.equal(r.status, 0);
  t.equal(r.stderr, "", "says nothing when it does not build");
  t.equal(builds(), 1, "dist/ newer than src/: no build");

  for (const f of ["src/a/x.ts", "src/a", "src", "package.json"]) at(f, 120);
  at("dist/.tsbuildinfo", 60);
  at("src/a/x.ts", 0);
  r = run();
  t.match(r.stderr, /dist\/ is older than its sources: building/);
  t.equal(builds(), 2, "a source file changed deep in src/: one build");
  t.equal(run().stderr, "");
  t.equal(builds(), 2, "and then none: the script stamps dist/.tsbuildinfo");

  at("dist/.tsbuildinfo", 60);
  at("src/a/x.ts", 120);
  unlinkSync(path.join(dir, "src/a/x.ts")); // the folder's own time moves to now
  run();
  t.equal(builds(), 3, "a removed source file: one build");

  at("dist/.tsbuildinfo", 60);
  for (const f of ["src/a", "src"]) at(f, 120);
  writeFileSync(path.join(dir, "tsconfig.json"), "{}");
  run();
  t.equal(builds(), 4, "a changed tsconfig.json: one build");
});

t.test("a failing build fails the script with its status", async (t) => {
  const { run } = scratch(t, 3);
  t.equal(run().status, 3);
});

t.test("a build says it is still building while it runs, and how long it took", async (t) => {
  // The fake build takes 1.5 s and the script reports every 100 ms: at least one progress line
  // (not an exact count: how many fit depends on the machine's load).
  const { run } = scratch(t, 0, 1500);
  const r = run({ BUILD_PROGRESS_INTERVAL_MS: "100" });
  t.equal(r.status, 0);
  t.match(r.stderr, /^dist\/ is missing: building\n/);
  t.match(r.stderr, /still building \(\d+ s\)/, "progress while it builds");
  t.match(r.stderr, /built in \d+ s\n$/, "and the end");
  t.equal(run().stderr, "", "nothing when nothing is built");
});

t.test("a failed build says so", async (t) => {
  const { run } = scratch(t, 3);
  const r = run();
  t.equal(r.status, 3);
  t.match(r.stderr, /build failed \(3\) after \d+ s/);
});

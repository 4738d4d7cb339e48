/**
 * scripts/build-if-stale.mjs, which `npm run cluster` runs first: `npm run build` only when
 * dist/ is missing or older than src/ (or a file that steers the build), run for real in a
 * scratch package whose build script records each run.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";

const SCRIPT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../scripts/build-if-stale.mjs");

t.test("builds when dist/ is missing or older than its sources, and only then", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "build-if-stale-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // The build appends a line to builds.log and writes dist/.tsbuildinfo, as tspc does.
  const build =
    "node -e \"const fs=require('fs');fs.appendFileSync('builds.log','x\\n');fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/.tsbuildinfo','{}')\"";
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "scratch", private: true, scripts: { build } }));
  mkdirSync(path.join(dir, "src/a"), { recursive: true });
  writeFileSync(path.join(dir, "src/a/x.ts"), "export const x = 1;\n");
  const builds = () => {
    try {
      return readFileSync(path.join(dir, "builds.log"), "utf8").split("\n").length - 1;
    } catch {
      return 0;
    }
  };
  const run = () => {
    const r = spawnSync(process.execPath, [SCRIPT], { cwd: dir, encoding: "utf8", env: { PATH: process.env.PATH ?? "" } });
    return { status: r.status, stderr: r.stderr };
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
  const dir = mkdtempSync(path.join(tmpdir(), "build-if-stale-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "scratch", private: true, scripts: { build: "exit 3" } }));
  mkdirSync(path.join(dir, "src"));
  const r = spawnSync(process.execPath, [SCRIPT], { cwd: dir, encoding: "utf8", env: { PATH: process.env.PATH ?? "" } });
  t.equal(r.status, 3);
});

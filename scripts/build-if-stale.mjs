#!/usr/bin/env node
// `npm run build` only when the compiled output is older than its sources, so that a tool run
// from dist/ (npm start, npm run cluster) starts at once when nothing changed and never runs stale code.
// The sources are src/ and the files that steer the build (a folder's own time counts too, so
// a file removed or renamed is a change); the output's age is that of
// dist/.tsbuildinfo, which the compiler rewrites on every build that emits and which this
// script touches after a build of its own (a build that changes nothing may leave it as is).
// Run from the package's root (npm scripts are). Exits with the build's status.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, statSync, utimesSync } from "node:fs";
import path from "node:path";

const STAMP = "dist/.tsbuildinfo";
const SOURCES = ["src", "package.json", "tsconfig.json", "tsconfig.client.json"];

function newest(entry) {
  if (!existsSync(entry)) return 0;
  const stat = statSync(entry);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const name of readdirSync(entry)) latest = Math.max(latest, newest(path.join(entry, name)));
  return latest;
}

const built = existsSync(STAMP) ? statSync(STAMP).mtimeMs : 0;
const changed = Math.max(...SOURCES.map(newest));
if (built > 0 && changed <= built) process.exit(0);

process.stderr.write(built === 0 ? "dist/ is missing: building\n" : "dist/ is older than its sources: building\n");
// The compiler prints nothing until it is done (minutes on a loaded machine, the first time):
// a line every few seconds says the wait is a build, not a hang.
const every = Number(process.env.BUILD_PROGRESS_INTERVAL_MS) > 0 ? Number(process.env.BUILD_PROGRESS_INTERVAL_MS) : 5000;
const started = Date.now();
const seconds = () => Math.round((Date.now() - started) / 1000);
const progress = setInterval(() => process.stderr.write(`still building (${seconds()} s): compiling src/ with tspc\n`), every);
const npm = process.env.npm_execpath;
const build = npm ? spawn(process.execPath, [npm, "run", "build"], { stdio: "inherit" }) : spawn("npm", ["run", "build"], { stdio: "inherit" });
build.on("exit", (code, signal) => {
  clearInterval(progress);
  const status = code ?? (signal !== null ? 1 : 0);
  if (status !== 0) {
    process.stderr.write(`build failed (${signal ?? code}) after ${seconds()} s\n`);
    process.exit(status);
  }
  if (existsSync(STAMP)) {
    const now = new Date();
    utimesSync(STAMP, now, now);
  }
  process.stderr.write(`built in ${seconds()} s\n`);
});

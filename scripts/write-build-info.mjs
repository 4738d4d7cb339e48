#!/usr/bin/env node
// Writes dist/src/build-info.json with the git commit the build was made from, so that
// `ringlimit --version` names the exact code that runs (package.json's version alone is the
// same for every commit between releases). GIT_COMMIT in the environment wins (an image built
// from a tarball, without .git, can pass it as a build argument); outside a checkout, and
// without it, the commit is "unknown". "-dirty" marks a build from a tree with uncommitted
// changes to tracked files. Run from the package's root, after the compiler (npm run build).
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";

function git(...args) {
  const run = spawnSync("git", args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  return run.status === 0 ? run.stdout.trim() : undefined;
}

function commit() {
  const given = process.env.GIT_COMMIT?.trim();
  if (given) return /^[0-9a-f]{7,40}(-dirty)?$/i.test(given) ? given : "unknown";
  const head = git("rev-parse", "--short=12", "HEAD");
  if (head === undefined) return "unknown";
  // `git diff --quiet` exits 1 when tracked files differ from HEAD.
  const dirty = spawnSync("git", ["diff", "--quiet", "HEAD", "--"], { stdio: "ignore" }).status === 1;
  return dirty ? `${head}-dirty` : head;
}

mkdirSync("dist/src", { recursive: true });
writeFileSync("dist/src/build-info.json", JSON.stringify({ commit: commit() }) + "\n");

#!/usr/bin/env node
// Prints, one a line, the built test files that start a ringlimit node: those whose imports
// reach the harness's node starters (a node process, an in-process node, or the node's own
// startNode), directly or through a helper such as test/peer/helpers.ts. .ci/run runs them a
// second time with WORKERS=2, which the harness hands to every node it starts
// (test/harness/run-workers.ts); the rest of the suite starts no node, so WORKERS changes
// nothing for it. LEFT_OUT says which node-starting files the lane would run for nothing.
// Run from the package's root after `npm run build`; prints nothing (and exits 1) when there
// is no build.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";

const TESTS = path.resolve("dist/test");
const STARTERS = ["dist/test/harness/node-process.js", "dist/test/harness/in-process-node.js", "dist/src/node.js"].map((p) => path.resolve(p));
const LEFT_OUT = [
  // the kernel-level fault suite: it runs on its own (test/faults/run)
  "faults",
  // every node these start sets WORKERS=2 itself, so the suite has run them so already
  "workers",
  // the local-cluster tool starts its nodes itself, without the harness's WORKERS
  "tools/local-cluster.process.test.js",
].map((p) => path.join(TESTS, p));

/** The relative modules a compiled file imports (static, dynamic, or for side effects). */
function importsOf(file) {
  const text = readFileSync(file, "utf8");
  const found = [];
  for (const m of text.matchAll(/(?:import|export)[^'"]*?from\s*["'](\.[^"']+)["']|import\(\s*["'](\.[^"']+)["']\s*\)|^import\s*["'](\.[^"']+)["']/gm)) {
    found.push(path.resolve(path.dirname(file), m[1] ?? m[2] ?? m[3]));
  }
  return found;
}

/** Every module the test files lead to, with what each imports. */
function importGraph(roots) {
  const graph = new Map();
  const pending = [...roots];
  while (pending.length > 0) {
    const file = pending.pop();
    if (graph.has(file)) continue;
    const imports = existsSync(file) ? importsOf(file) : [];
    graph.set(file, imports);
    pending.push(...imports);
  }
  return graph;
}

/** The modules from which a starter can be reached: grown from the starters until nothing is added (cycles included). */
function reachingStarters(graph) {
  const reaching = new Set(STARTERS);
  for (let grew = true; grew;) {
    grew = false;
    for (const [file, imports] of graph) {
      if (!reaching.has(file) && imports.some((i) => reaching.has(i))) {
        reaching.add(file);
        grew = true;
      }
    }
  }
  return reaching;
}

function testFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (LEFT_OUT.includes(full)) return [];
    if (e.isDirectory()) return testFiles(full);
    return e.name.endsWith(".test.js") ? [full] : [];
  });
}

if (!existsSync(TESTS)) process.exit(1);
const tests = testFiles(TESTS);
const reaching = reachingStarters(importGraph(tests));
const found = tests
  .filter((f) => reaching.has(f))
  .map((f) => path.relative(process.cwd(), f))
  .sort();
process.stdout.write(found.map((f) => f + "\n").join(""));
process.exit(found.length > 0 ? 0 : 1);

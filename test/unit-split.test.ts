/**
 * The split between unit tests and process tests (docs/development.md): a test file that
 * starts node processes is named `*.process.test.ts`; every other test file is a unit test,
 * run by `npm run test:unit`, and must not reach `node:child_process` through anything it
 * imports (the harness's node-process.ts, cluster.ts and run-main.ts all do). Read from the
 * sources' import graph, so the split cannot rot when a unit test picks up a spawning helper.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { ROOT } from "./harness/paths.js";

const TEST = path.join(ROOT, "test");
const SPAWNS = new Set(["node:child_process", "child_process"]);

function* testFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* testFiles(full);
    else if (entry.name.endsWith(".test.ts")) yield full;
  }
}

/** Module specifiers a file loads at run time: imports and re-exports (not `import type`), and import() of a literal. */
function specifiers(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const statements = [...text.matchAll(/(?:^|\n)\s*(import|export)(\s+type)?\s[^;]*?from\s+"([^"]+)"/g)].filter((m) => m[2] === undefined).map((m) => m[3]!);
  const dynamic = [...text.matchAll(/\bimport\(\s*"([^"]+)"\s*\)|(?:^|\n)\s*import\s+"([^"]+)"/g)].map((m) => (m[1] ?? m[2])!);
  return [...statements, ...dynamic];
}

/** The chain of imports from `file` to a module that spawns processes, or undefined. */
function spawnChain(file: string, seen = new Set<string>()): string[] | undefined {
  if (seen.has(file)) return undefined;
  seen.add(file);
  for (const spec of specifiers(file)) {
    if (SPAWNS.has(spec)) return [path.relative(ROOT, file), spec];
    if (!spec.startsWith(".")) continue;
    const next = path.resolve(path.dirname(file), spec.replace(/\.js$/, ".ts"));
    let chain: string[] | undefined;
    try {
      chain = spawnChain(next, seen);
    } catch {
      continue; // not a source file (a .json, a generated file)
    }
    if (chain !== undefined) return [path.relative(ROOT, file), ...chain];
  }
  return undefined;
}

const files = [...testFiles(TEST)];

t.test("a unit test file reaches no node:child_process through its imports", async (t) => {
  const units = files.filter((f) => !f.endsWith(".process.test.ts"));
  t.ok(units.length > 50, `${units.length} unit test files`);
  t.same(
    units
      .map((f) => spawnChain(f))
      .filter((c) => c !== undefined)
      .map((c) => c.join(" -> ")),
    [],
    "a file that starts processes is named *.process.test.ts",
  );
});

t.test("a process test file does start processes (or it is a unit test)", async (t) => {
  const processes = files.filter((f) => f.endsWith(".process.test.ts"));
  t.ok(processes.length > 20, `${processes.length} process test files`);
  t.same(
    processes.filter((f) => spawnChain(f) === undefined).map((f) => path.relative(ROOT, f)),
    [],
    "each *.process.test.ts reaches node:child_process",
  );
});

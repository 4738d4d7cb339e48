/**
 * The layout rule (README, Layout) as a test: data flows one way, nothing in src/algorithms imports anything
 * outside it, and there are no circular imports anywhere in src/ (as madge -c would say).
 * Reads the TypeScript sources themselves.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";

const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src");

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sources(full);
    return name.endsWith(".ts") ? [full] : [];
  });
}

/** Relative imports of a module (type-only ones too: they still tie modules together). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const found: string[] = [];
  for (const m of text.matchAll(/(?:import|export)[^'"]*?from\s+["'](\.[^"']+)["']/g)) {
    found.push(path.resolve(path.dirname(file), m[1]!.replace(/\.js$/, ".ts")));
  }
  return found;
}

const files = sources(SRC);
const graph = new Map(files.map((f) => [f, importsOf(f)]));

t.test("src/ has TypeScript modules to check", async (t) => {
  t.ok(files.length > 20, `${files.length} modules`);
});

t.test("src/algorithms imports nothing outside itself", async (t) => {
  const algorithms = path.join(SRC, "algorithms") + path.sep;
  const outside = [...graph]
    .filter(([f]) => f.startsWith(algorithms))
    .flatMap(([f, deps]) => deps.filter((d) => !d.startsWith(algorithms)).map((d) => `${path.relative(SRC, f)} → ${path.relative(SRC, d)}`));
  t.same(outside, []);
  const text = files
    .filter((f) => f.startsWith(algorithms))
    .map((f) => readFileSync(f, "utf8"))
    .join("\n");
  t.notMatch(text, /Date\.now|performance\.now|setTimeout|setInterval|from "node:/, "no clock reads, timers or I/O in the algorithms");
});

t.test("no circular imports", async (t) => {
  const cycles: string[] = [];
  const state = new Map<string, "visiting" | "done">();
  const visit = (file: string, trail: string[]) => {
    if (state.get(file) === "done") return;
    if (state.get(file) === "visiting") {
      cycles.push([...trail.slice(trail.indexOf(file)), file].map((f) => path.relative(SRC, f)).join(" → "));
      return;
    }
    state.set(file, "visiting");
    for (const dep of graph.get(file) ?? []) visit(dep, [...trail, file]);
    state.set(file, "done");
  };
  for (const f of files) visit(f, []);
  t.same(cycles, []);
});

/** Modules a module loads at run time: relative and bare specifiers, `import type` left out. */
function runtimeImportsOf(file: string): { relative: string[]; bare: string[] } {
  const text = readFileSync(file, "utf8");
  const relative: string[] = [];
  const bare: string[] = [];
  for (const m of text.matchAll(/^(?:import|export)(?!\s+type\b)[^'";]*?from\s+["']([^"']+)["']/gm)) {
    const spec = m[1]!;
    if (spec.startsWith(".")) relative.push(path.resolve(path.dirname(file), spec.replace(/\.js$/, ".ts")));
    else bare.push(spec);
  }
  return { relative, bare };
}

t.test("src/client loads only itself, the ring code and pure helpers: no uWebSockets.js, http/ or peer/", async (t) => {
  const client = path.join(SRC, "client") + path.sep;
  // The ring and its hash, the key layout, the blocked cache, the product slug, the algorithm names, the request bounds.
  const allowed = new Set(
    [
      "shard/cluster/ring.ts",
      "shard/hash.ts",
      "shard/table/state-key.ts",
      "shard/cluster/blocked-cache.ts",
      "slug.ts",
      "algorithms/types.ts",
      "decision.ts",
    ].map((f) => path.join(SRC, f)),
  );
  const reached = new Set<string>();
  const bare = new Set<string>();
  const visit = (file: string) => {
    if (reached.has(file)) return;
    reached.add(file);
    const deps = runtimeImportsOf(file);
    for (const b of deps.bare) bare.add(b);
    for (const d of deps.relative) visit(d);
  };
  for (const f of files.filter((f) => f.startsWith(client))) visit(f);
  t.ok(reached.size > 8, `${reached.size} modules reached from src/client`);
  t.same(
    [...reached].filter((f) => !f.startsWith(client) && !allowed.has(f)).map((f) => path.relative(SRC, f)),
    [],
    "nothing else in src/ is loaded",
  );
  t.same(
    [...bare].filter((b) => !b.startsWith("node:") && b !== "undici"),
    [],
    "no package but undici at run time (the frameworks are type-only imports)",
  );
});

/**
 * The layout's rules as a test (docs/architecture.md): which folder may import which, the
 * size of src/'s root and of its files, no circular imports anywhere in src/ (as madge -c
 * would say), and no unused runtime dependency. Reads the TypeScript sources themselves.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { ROOT } from "./harness/paths.js";
import t from "tap";

const SRC = path.join(ROOT, "src");
const MAX_ROOT_FILES = 6;
const MAX_LINES = 400;
const MAX_FOLDER_FILES = 12;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sources(full);
    return name.endsWith(".ts") ? [full] : [];
  });
}

/** Import specifiers of a module (type-only ones too: they still tie modules together). */
function specifiersOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const found: string[] = [];
  for (const m of text.matchAll(/(?:import|export)[^'"]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)|^import\s+["']([^"']+)["']/gm)) {
    found.push((m[1] ?? m[2] ?? m[3])!);
  }
  return found;
}

/** Relative imports, resolved to the .ts file they name. */
function importsOf(file: string): string[] {
  return specifiersOf(file)
    .filter((s) => s.startsWith("."))
    .map((s) => path.resolve(path.dirname(file), s.replace(/\.js$/, ".ts")));
}

const files = sources(SRC);
const graph = new Map(files.map((f) => [f, importsOf(f)]));
const rel = (f: string) => path.relative(SRC, f);
const inside = (folder: string) => (f: string) => f.startsWith(path.join(SRC, folder) + path.sep);

/** Every import from a file in `from` to a file matching `forbidden`, as "a → b". */
function violations(from: (f: string) => boolean, forbidden: (dep: string) => boolean): string[] {
  return [...graph].filter(([f]) => from(f)).flatMap(([f, deps]) => deps.filter(forbidden).map((d) => `${rel(f)} → ${rel(d)}`));
}

t.test("src/ has TypeScript modules to check, and the checks see their imports", async (t) => {
  t.ok(files.length > 20, `${files.length} modules`);
  t.ok(graph.get(path.join(SRC, "node.ts"))!.includes(path.join(SRC, "http", "server.ts")), "node.ts → http/server.ts is found");
});

t.test("algorithms/ and peer/ import nothing outside themselves", async (t) => {
  for (const folder of ["algorithms", "peer"]) {
    t.same(
      violations(inside(folder), (d) => !inside(folder)(d)),
      [],
      folder,
    );
  }
  const text = files
    .filter(inside("algorithms"))
    .map((f) => readFileSync(f, "utf8"))
    .join("\n");
  t.notMatch(text, /Date\.now|performance\.now|setTimeout|setInterval|from "node:/, "no clock reads, timers or I/O in the algorithms");
});

t.test("only tests register an algorithm beside the offered ones", async (t) => {
  const registry = path.join(SRC, "algorithms", "registry.ts");
  t.same(files.filter((f) => f !== registry && readFileSync(f, "utf8").includes("registerForTest")).map(rel), []);
});

t.test("config.ts reads settings and imports nothing from shard/: every arrow runs down to it", async (t) => {
  t.same(
    violations((f) => f === path.join(SRC, "config.ts"), inside("shard")),
    [],
  );
});

t.test("shard/: the ring, the table, the owner's decisions and records never import the cluster", async (t) => {
  for (const folder of ["shard/ring", "shard/table", "shard/local", "shard/records"]) {
    t.same(violations(inside(folder), inside("shard/cluster")), [], folder);
  }
  // The ring and its keys are shared with the client: they know the request bounds and nothing else.
  t.same(
    violations(inside("shard/ring"), (d) => !inside("shard/ring")(d) && d !== path.join(SRC, "decision.ts")),
    [],
    "shard/ring",
  );
  t.same(
    violations(inside("shard/table"), (d) => inside("shard/local")(d) || inside("shard/records")(d)),
    [],
    "the table is the bottom",
  );
});

t.test("shard/ imports nothing from http/, not even a type: the front end sits above the shard", async (t) => {
  t.same(violations(inside("shard"), inside("http")), []);
});

t.test("shard/local (the owner's decisions) never loads the settings' loader, directly or through another module", async (t) => {
  // config.ts and config/ read the environment and pull in the policy files' checks: a decision needs none of it.
  const loader = (f: string) => f === path.join(SRC, "config.ts") || inside("config")(f);
  const reached = new Set<string>();
  const visit = (file: string) => {
    if (reached.has(file)) return;
    reached.add(file);
    for (const d of graph.get(file) ?? []) visit(d);
  };
  for (const f of files.filter(inside("shard/local"))) visit(f);
  t.ok(reached.size > 10, `${reached.size} modules reached from shard/local`);
  t.same([...reached].filter(loader).map(rel), []);
});

t.test("shard/ takes only types from config.ts: a value would load the settings' loader into the shard", async (t) => {
  const loaderValues = files
    .filter(inside("shard"))
    .flatMap((f) => [...readFileSync(f, "utf8").matchAll(/^import\s+(?!type\b)[^;]*from\s+["'][./]*config\.js["']/gm)].map(() => rel(f)));
  t.same(loaderValues, []);
});

t.test("shard/cluster/: wire formats sit below routing, membership and movement", async (t) => {
  const cluster = (sub: string) => inside(`shard/cluster/${sub}`);
  t.same(
    violations(cluster("wire"), (d) => cluster("routing")(d) || cluster("membership")(d) || cluster("movement")(d)),
    [],
  );
});

t.test(`no folder of src/ holds more than ${MAX_FOLDER_FILES} files`, async (t) => {
  const folders = new Map<string, number>();
  for (const f of files) folders.set(path.dirname(f), (folders.get(path.dirname(f)) ?? 0) + 1);
  t.same(
    [...folders].filter(([, n]) => n > MAX_FOLDER_FILES).map(([d, n]) => `${path.relative(SRC, d) || "."}: ${n}`),
    [],
  );
});

t.test("metrics/ imports nothing from shard/: shard logic (the top offenders' sketch) lives there, and metrics only reads it", async (t) => {
  t.same(violations(inside("metrics"), inside("shard")), []);
});

t.test("http/ reaches shard/ only through the composition root", async (t) => {
  t.same(violations(inside("http"), inside("shard")), []);
});

t.test("rls/ (Envoy's rate limit service) reaches shard/ only through the composition root", async (t) => {
  t.same(violations(inside("rls"), inside("shard")), []);
});

t.test("rls/h2 (the HTTP/2 server) imports nothing of the RLS layer: the layer implements its StreamHandler", async (t) => {
  t.same(
    violations(inside("rls/h2"), (d) => d.startsWith(SRC) && !inside("rls/h2")(d)),
    [],
  );
});

t.test("rls/ imports nothing from http/; auth/ imports nothing of src/", async (t) => {
  t.same(violations(inside("rls"), inside("http")), []);
  t.same(
    violations(inside("auth"), (d) => d.startsWith(SRC) && !inside("auth")(d)),
    [],
  );
});

t.test(`src/ root holds at most ${MAX_ROOT_FILES} files`, async (t) => {
  const root = readdirSync(SRC).filter((name) => statSync(path.join(SRC, name)).isFile());
  t.ok(root.length <= MAX_ROOT_FILES, `src/: ${root.join(", ")}`);
});

t.test(`no file in src/ is over ${MAX_LINES} lines`, async (t) => {
  const lines = files.map((f) => [rel(f), readFileSync(f, "utf8").trimEnd().split("\n").length] as const);
  t.same(
    lines.filter(([, n]) => n > MAX_LINES),
    [],
  );
});

t.test("no circular imports", async (t) => {
  const cycles: string[] = [];
  const state = new Map<string, "visiting" | "done">();
  const visit = (file: string, trail: string[]) => {
    if (state.get(file) === "done") return;
    if (state.get(file) === "visiting") {
      cycles.push([...trail.slice(trail.indexOf(file)), file].map(rel).join(" → "));
      return;
    }
    state.set(file, "visiting");
    for (const dep of graph.get(file) ?? []) visit(dep, [...trail, file]);
    state.set(file, "done");
  };
  for (const f of files) visit(f, []);
  t.same(cycles, []);
});

t.test("every runtime dependency is imported by src/", async (t) => {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  const imported = new Set(
    files.flatMap(specifiersOf).map((s) => {
      const parts = s.split("/");
      return s.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!;
    }),
  );
  const unused = Object.keys(pkg.dependencies).filter((d) => !imported.has(d));
  t.same(unused, [], "unused dependencies");
});

/** Packages a module loads at run time (bare specifiers, `import type` left out). */
function runtimePackagesOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const bare: string[] = [];
  for (const m of text.matchAll(/^(?:import|export)(?!\s+type\b)[^'";]*?from\s+["']([^"']+)["']/gm)) {
    if (!m[1]!.startsWith(".")) bare.push(m[1]!);
  }
  return bare;
}

t.test("src/client loads only itself, the ring code and pure helpers: no uWebSockets.js, http/ or peer/", async (t) => {
  const client = path.join(SRC, "client") + path.sep;
  // The ring and its hash, the key layout, the blocked cache (what a key costs in bytes, the memory of resets), the product slug, the request bounds,
  // and the algorithm registry (names and codes; the algorithms are pure and import nothing else: see above).
  // The client package (packages/client) compiles src/client and every module it names,
  // type-only imports included (tsc emits them all): this list is what ringlimit-client ships.
  const allowed = new Set(
    [
      "shard/ring/ring.ts",
      "shard/ring/hash.ts",
      "shard/ring/state-key.ts",
      "shard/cluster/routing/blocked-cache.ts",
      "shard/table/key-bytes.ts",
      "shard/table/reset-memory.ts",
      "decision.ts",
    ].map((f) => path.join(SRC, f)),
  );
  const algorithms = inside("algorithms");
  const reached = new Set<string>();
  const bare = new Set<string>();
  const visit = (file: string) => {
    if (reached.has(file)) return;
    reached.add(file);
    for (const b of runtimePackagesOf(file)) bare.add(b);
    for (const d of importsOf(file)) visit(d);
  };
  for (const f of files.filter((f) => f.startsWith(client))) visit(f);
  t.ok(reached.size > 8, `${reached.size} modules reached from src/client`);
  t.same(
    [...reached].filter((f) => !f.startsWith(client) && !allowed.has(f) && !algorithms(f)).map((f) => path.relative(SRC, f)),
    [],
    "nothing else in src/ is loaded",
  );
  t.same(
    [...bare].filter((b) => !b.startsWith("node:") && b !== "undici"),
    [],
    "no package but undici at run time (the frameworks are type-only imports)",
  );
});

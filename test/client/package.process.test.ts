/**
 * The packages as a user gets them: a real `npm pack` of the server and of ringlimit-client,
 * then a scratch app in a temporary directory that installs the client tarball from the
 * file (`npm i --no-audit --no-fund`), and `node` scripts that require() and import it and
 * check a real ringlimit node. Measures the install (size, time) and holds it to the client's
 * promise: under 1 MB installed besides undici, no native code, no bins, CommonJS and ESM,
 * types for both (type-checked by tsc as an app would).
 *
 * Packs with --ignore-scripts: `npm test` has just built dist/, and prepack's build (pinned
 * below) would add a minute on a loaded machine. The install needs undici from the registry:
 * the test is skipped, saying so, when the registry cannot be reached.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { TEST_KEY } from "../harness/http-client.js";
import { spawnProtected } from "../harness/child-processes.js";
import { spawnNode } from "../harness/node-process.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const CLIENT = path.join(ROOT, "packages/client");
const NPM_ENV = { ...process.env, npm_config_update_notifier: "false", npm_config_audit: "false", npm_config_fund: "false" };

// npm and tsc run to completion under the harness's starter: killed with the test however it ends.
async function run(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = NPM_ENV, timeoutMs = 90_000): Promise<string> {
  const child = spawnProtected(file, args, { cwd, env });
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.signalGroup("SIGKILL"), timeoutMs);
  try {
    const code = await child.closed;
    if (code !== 0) throw new Error(`${file} ${args.join(" ")}: exit ${code ?? child.signalCode}\n${stderr}`);
    return stdout;
  } finally {
    clearTimeout(timer);
  }
}

interface PackResult {
  filename: string;
  unpackedSize: number;
  files: { path: string }[];
}

async function pack(dir: string, dest: string): Promise<PackResult> {
  const out = await run("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dest], dir);
  return (JSON.parse(out) as PackResult[])[0]!;
}

/** Every file under `dir`, relative to it (symlinks not followed). */
function walk(dir: string, base = dir): { rel: string; bytes: number }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return walk(full, base);
    return e.isFile() ? [{ rel: path.relative(base, full), bytes: statSync(full).size }] : [];
  });
}

// About 20 s on an idle machine; each npm and tsc start-up takes seconds more on a loaded one
// (115 s measured at load average 30), so this file gets more than the suite's 120 s.
t.setTimeout(300_000);

// The slow steps run side by side (npm's start-up takes seconds on a loaded machine): both
// packs, then the install and the node the scripts check against.
const dest = mkdtempSync(path.join(tmpdir(), "ringlimit-pack-"));
const app = mkdtempSync(path.join(tmpdir(), "ringlimit-app-"));
t.teardown(() => {
  rmSync(dest, { recursive: true, force: true });
  rmSync(app, { recursive: true, force: true });
});
const [serverPack, clientPack] = await Promise.all([pack(ROOT, dest), pack(CLIENT, dest)]);
const nodeStarting = spawnNode({});
t.teardown(async () => (await nodeStarting).kill());
writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "scratch-app", version: "1.0.0", private: true }));
const started = performance.now();
const install = await run("npm", ["i", "--no-audit", "--no-fund", path.join(dest, clientPack.filename)], app).then(
  () => ({ seconds: (performance.now() - started) / 1000, error: undefined }),
  (err: Error) => ({ seconds: 0, error: err }),
);
// Only a network failure skips; any other failure of the install fails the test below.
const skip =
  install.error !== undefined && /ENOTFOUND|EAI_AGAIN|ENETUNREACH|ECONNREFUSED|ETIMEDOUT|ECONNRESET/.test(install.error.message)
    ? "the npm registry cannot be reached: installing the client needs undici from it"
    : false;

t.test("the server package: a files list, a prepack build, no tests or benches in its tarball", async (t) => {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { files: string[]; scripts: Record<string, string>; workspaces: string[] };
  t.equal(pkg.scripts.prepack, "npm run build", "prepack builds, so a pack of a fresh clone carries dist/");
  t.match(pkg.scripts.build, /npm run build -w ringlimit-client/, "the build builds the client package too (ringlimit/client points into it)");
  t.same(pkg.workspaces, ["packages/client"]);
  const paths = serverPack.files.map((f) => f.path);
  t.comment(`ringlimit tarball: ${paths.length} files, ${(serverPack.unpackedSize / 1e6).toFixed(2)} MB unpacked`);
  t.same(
    paths.filter((p) => /^(test|bench|dist\/test|dist\/bench|scratch|deploy)\//.test(p) || /\.tsbuildinfo/.test(p)),
    [],
    "no tests, benches or build state",
  );
  t.ok(paths.includes("dist/src/main.js"), "the server's entry point (bin)");
  for (const entry of ["esm", "cjs"])
    t.ok(paths.includes(`packages/client/dist/${entry}/client/index.js`), `ringlimit/client re-exports the client's ${entry} build`);
});

t.test("ringlimit-client installed from its tarball into a scratch app", { skip }, async (t) => {
  const pkg = JSON.parse(readFileSync(path.join(CLIENT, "package.json"), "utf8")) as {
    name: string;
    scripts: Record<string, string>;
    dependencies: Record<string, string>;
    exports: Record<string, { import: { types: string; default: string }; require: { types: string; default: string } } | string>;
  };
  t.equal(pkg.scripts.prepack, "node build.mjs", "prepack builds");
  t.same(Object.keys(pkg.dependencies), ["undici"], "undici is the only runtime dependency");

  if (install.error !== undefined) throw install.error;
  t.same(
    clientPack.files.map((f) => f.path).filter((p) => !p.startsWith("dist/") && p !== "package.json" && p !== "README.md"),
    [],
    "the tarball holds dist/, package.json and README.md only",
  );
  const seconds = install.seconds;

  const modules = path.join(app, "node_modules");
  const installed = readdirSync(modules).filter((n) => !n.startsWith("."));
  t.same(installed.sort(), ["ringlimit-client", "undici"], "the client and undici, nothing else");
  const files = walk(modules);
  const own = files.filter((f) => !f.rel.startsWith("undici" + path.sep)).reduce((n, f) => n + f.bytes, 0);
  const undici = files.filter((f) => f.rel.startsWith("undici" + path.sep)).reduce((n, f) => n + f.bytes, 0);
  t.comment(`installed in ${seconds.toFixed(1)} s: ringlimit-client ${(own / 1e3).toFixed(0)} kB, undici ${(undici / 1e6).toFixed(2)} MB`);
  t.ok(own < 1_000_000, `under 1 MB installed besides undici (${own} bytes)`);
  t.same(
    files.filter((f) => /\.node$|binding\.gyp$/.test(f.rel)).map((f) => f.rel),
    [],
    "no native code",
  );
  t.notOk(existsSync(path.join(modules, ".bin")), "no bins");
  for (const name of installed) {
    const manifest = JSON.parse(readFileSync(path.join(modules, name, "package.json"), "utf8")) as {
      bin?: unknown;
      scripts?: Record<string, string>;
      gypfile?: boolean;
    };
    t.equal(manifest.bin, undefined, `${name} declares no bin`);
    t.notOk(manifest.gypfile, `${name} builds nothing`);
    t.same(
      Object.keys(manifest.scripts ?? {}).filter((s) => /^(pre|post)?install$/.test(s)),
      [],
      `${name} runs no install script`,
    );
  }

  // Both module systems, every entry point, against the real node: the second check of a limit of 1 is refused.
  const check = (load: string) => `
    ${load}
    const client = new RingLimitClient({ urls: process.env.RINGLIMIT_URL, apiKey: process.env.RINGLIMIT_API_KEY, timeoutMs: 5000 });
    const run = async () => {
      const request = { namespace: "package-test", identifier: process.argv[2], limit: 1, duration: 3600 };
      const first = await client.limit(request);
      const second = await client.limit(request);
      console.log(JSON.stringify({ middleware: [typeof fastify, typeof express, typeof hono], answers: [first, second].map((r) => [r.allowed, r.status, r.degraded]) }));
      await client.close();
    };
    run();`;
  writeFileSync(
    path.join(app, "check.cjs"),
    check(`const { RingLimitClient } = require("ringlimit-client");
      const { ringLimitFastify: fastify } = require("ringlimit-client/fastify");
      const { ringLimitExpress: express } = require("ringlimit-client/express");
      const { ringLimitHono: hono } = require("ringlimit-client/hono");`),
  );
  writeFileSync(
    path.join(app, "check.mjs"),
    check(`import { RingLimitClient } from "ringlimit-client";
      import { ringLimitFastify as fastify } from "ringlimit-client/fastify";
      import { ringLimitExpress as express } from "ringlimit-client/express";
      import { ringLimitHono as hono } from "ringlimit-client/hono";`),
  );
  const node = await nodeStarting;
  const env = { PATH: process.env.PATH ?? "", RINGLIMIT_URL: node.url, RINGLIMIT_API_KEY: TEST_KEY };
  const typecheck = writeTypeCheck(app);
  const tsc = path.join(ROOT, "node_modules/typescript/bin/tsc");
  const [cjs, mjs, typed] = await Promise.allSettled([
    run(process.execPath, ["check.cjs", "cjs"], app, env, 30_000),
    run(process.execPath, ["check.mjs", "mjs"], app, env, 30_000),
    run(process.execPath, [tsc, "-p", typecheck], app, env, 60_000),
  ]);
  for (const [script, outcome] of [
    ["check.cjs", cjs],
    ["check.mjs", mjs],
  ] as const) {
    if (outcome.status === "rejected") {
      t.fail(`${script}: ${String(outcome.reason)}`);
      continue;
    }
    const out = JSON.parse(outcome.value) as { middleware: string[]; answers: unknown[] };
    t.same(out.middleware, ["function", "function", "function"], `${script}: the middleware loads`);
    t.same(
      out.answers,
      [
        [true, 200, false],
        [false, 429, false],
      ],
      `${script}: allowed, then refused by the node`,
    );
  }

  // Types: every entry point names its declarations for both conditions, and tsc type-checks an
  // ES module and a CommonJS module of the app against them (node16 resolution, as apps use).
  const root = path.join(modules, "ringlimit-client");
  for (const [subpath, entry] of Object.entries(pkg.exports)) {
    if (typeof entry === "string") continue;
    for (const condition of [entry.import, entry.require]) t.ok(existsSync(path.join(root, condition.types)), `${subpath}: ${condition.types}`);
  }
  t.equal(typed.status === "rejected" ? String(typed.reason) : "", "", "tsc accepts the app's ES and CommonJS modules");
});

/**
 * An ES module and a CommonJS module of an app that use the client's types (node16
 * resolution, as apps use): tsc must accept both, and refuse a wrong algorithm name (so the
 * types are real, not `any`).
 */
function writeTypeCheck(dir: string): string {
  const use = `
    const client = new RingLimitClient({ urls: "http://127.0.0.1:1", apiKey: "k" });
    const result: Promise<LimitResult> = client.limit({ namespace: "n", identifier: "i", limit: 1, duration: 1, algorithm: "token-bucket" });
    // @ts-expect-error: not an algorithm
    client.limit({ namespace: "n", identifier: "i", limit: 1, duration: 1, algorithm: "nope" });
    export { result };`;
  writeFileSync(path.join(dir, "use.mts"), `import { RingLimitClient, type LimitResult } from "ringlimit-client";\n${use}`);
  writeFileSync(
    path.join(dir, "use.cts"),
    `import rl = require("ringlimit-client");\ntype LimitResult = rl.LimitResult;\nconst RingLimitClient = rl.RingLimitClient;\n${use}`,
  );
  writeFileSync(
    path.join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        module: "node16",
        moduleResolution: "node16",
        target: "ES2022",
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        typeRoots: [path.join(ROOT, "node_modules/@types")],
        types: ["node"],
      },
      files: ["use.mts", "use.cts"],
    }),
  );
  return dir;
}

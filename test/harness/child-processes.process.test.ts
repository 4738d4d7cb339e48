/**
 * No process outlives its test: a test process ended by a signal (tap ends a file past its
 * timeout with SIGALRM, then SIGKILL 500 ms later if it is still there) takes everything it
 * started with it, not only when it exits by itself; whichever harness starter started them
 * (spawnNode, and runMain, whose node test/cli once left listening for 35 minutes). And no
 * test starts a process any other way.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { constants as osConstants } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { spawnProtected } from "./child-processes.js";
import { eventually } from "./wait.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const HOLDER = path.join(HERE, "fixtures/hold-child.js");
const TEST_SOURCES = path.resolve(HERE, "../../../test");

/** Running, and not a zombie left for an init that may not reap (containers). */
const alive = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]![0] !== "Z";
  } catch {
    return false;
  }
};

// SIGKILL: what tap sends 500 ms after SIGALRM to a file that has not exited by then (a
// loaded machine); no handler runs, the kernel's death signal (setpriv --pdeathsig) must do it.
const CASES = [
  ...(["SIGTERM", "SIGINT", "SIGALRM", "SIGKILL"] as const).map((signal) => ["spawnNode", signal] as const),
  ...(["SIGALRM", "SIGKILL"] as const).map((signal) => ["runMain", signal] as const),
];
for (const [starter, signal] of CASES) {
  t.test(`a test process ended by ${signal} kills the node it started with ${starter}`, async (t) => {
    const holder = spawnProtected(process.execPath, [HOLDER, starter], { env: process.env, stdio: ["ignore", "pipe", "inherit"] });
    t.teardown(() => holder.signalGroup("SIGKILL"));
    let out = "";
    holder.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    t.ok(await eventually(() => out.includes("\n"), 20_000), "the holder started a node and it answered /ready");
    const pids = out.trim().split(" ").map(Number);
    t.equal(pids.length, 1, `one child process: ${out.trim()}`);
    const nodePid = pids[0]!;
    // When this test fails, it must not leak the node it shows leaking (its group is its pid).
    t.teardown(() => {
      if (alive(nodePid)) process.kill(-nodePid, "SIGKILL");
    });
    t.ok(alive(nodePid), `node ${nodePid} is running`);
    const exited = new Promise<number | NodeJS.Signals | null>((resolve) => holder.on("exit", (code, sig) => resolve(code ?? sig)));
    holder.kill(signal);
    if (signal === "SIGKILL") t.equal(await exited, "SIGKILL", "the holder is killed");
    else t.equal(await exited, 128 + osConstants.signals[signal], "the holder exits with 128 + the signal's number");
    t.ok(await eventually(() => !alive(nodePid), 5_000), `node ${nodePid} is gone`);
  });
}

// tap's loader in a node holds every module's source map: 28 MiB of heap on Node 24 (untapped.ts).
t.test("a process a test starts runs without tap's loader, with the NODE_OPTIONS it was given", async (t) => {
  const report = `process.stdout.write(JSON.stringify({
    nodeOptions: process.env.NODE_OPTIONS ?? null,
    tapVariables: Object.keys(process.env).filter((k) => k.startsWith("_TAPJS_")),
    processinfo: Symbol.for("@tapjs/processinfo.ProcessInfoNodeData") in globalThis,
    sourceMaps: process.sourceMapsEnabled,
  }))`;
  const run = async (env: NodeJS.ProcessEnv) => {
    const child = spawnProtected(process.execPath, ["-e", report], { env });
    let out = "";
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    t.equal(await child.closed, 0);
    return JSON.parse(out) as unknown;
  };
  // The test process itself runs with the loader: what there is to keep out.
  t.match(process.env.NODE_OPTIONS, /@tapjs[\/]processinfo/, "tap runs this file with its loader");
  t.same(await run({ PATH: process.env.PATH, NODE_OPTIONS: "--max-old-space-size=64" }), {
    nodeOptions: "--max-old-space-size=64",
    tapVariables: [],
    processinfo: false,
    sourceMaps: false,
  });
  t.same(await run({ PATH: process.env.PATH }), { nodeOptions: null, tapVariables: [], processinfo: false, sourceMaps: false });
  // A caller that passes its own environment on passes tap's NODE_OPTIONS: the loader is taken out of it.
  t.same(await run(process.env), { nodeOptions: null, tapVariables: [], processinfo: false, sourceMaps: false });
});

/** test/**.ts, the sources (the compiled tests run from dist/test). */
function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sources(full);
    return name.endsWith(".ts") ? [full] : [];
  });
}

/** The registry itself, and the bench tests' recorder, which wraps the starters and starts nothing. */
const EXEMPT = ["harness/child-processes.ts", "bench/fixtures/record-starts.ts"];
/** The test process waits for these: they end before it can act on a signal. */
const SYNCHRONOUS = ["spawnSync", "execFileSync", "execSync"];

t.test("tests start processes only through harness/child-processes.ts (synchronous runs aside)", async (t) => {
  const files = sources(TEST_SOURCES);
  t.ok(files.length > 50, `${files.length} test sources`);
  const offenders: string[] = [];
  for (const file of files) {
    if (EXEMPT.some((f) => file === path.join(TEST_SOURCES, f))) continue;
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(/^import\s+(type\s+)?([^;]*?)\s+from\s+["'](?:node:)?child_process["']/gm)) {
      if (m[1] !== undefined) continue; // types only
      const clause = m[2]!.trim();
      const named = /^\{([^}]*)\}$/.exec(clause)?.[1];
      const starters =
        named === undefined
          ? [clause] // a default or namespace import reaches every starter
          : named
              .split(",")
              .map((s) => s.trim())
              .filter((s) => s !== "" && !s.startsWith("type ") && !SYNCHRONOUS.includes(s.split(/\s+as\s+/)[0]!));
      if (starters.length > 0) offenders.push(`${path.relative(TEST_SOURCES, file)}: ${starters.join(", ")}`);
    }
  }
  t.same(offenders, [], "no test imports spawn, fork, exec or execFile from node:child_process");
});

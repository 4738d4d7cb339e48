/**
 * Every bench answers `--help` with its options and their defaults, and refuses an unknown
 * option with one line and exit 2 (bench/lib/options.mjs); neither starts anything. Each
 * bench/*.mjs runs as a real process with a recorder preloaded (fixtures/record-starts.ts)
 * that logs every child process, listening socket and worker thread it starts, so a bench
 * added without benchOptions(), or one that spawns before parsing its options, fails here.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import t from "tap";
import { spawnProtected } from "../../harness/child-processes.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../../../..");
const BENCH = path.join(ROOT, "bench");
const RECORDER = pathToFileURL(path.join(HERE, "../fixtures/record-starts.js")).href;
const benches = readdirSync(BENCH)
  .filter((f) => f.endsWith(".mjs"))
  .sort();

/** f over every bench, four at a time (each run is a node start: seconds on a busy machine). */
async function eachBench<T>(f: (bench: string) => Promise<T>): Promise<[string, T][]> {
  const out: [string, T][] = [];
  for (let i = 0; i < benches.length; i += 4) {
    const group = benches.slice(i, i + 4);
    out.push(...(await Promise.all(group.map(async (b) => [b, await f(b)] as [string, T]))));
  }
  return out;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  started: string;
}

/** `node <args>` from the repository root with the recorder preloaded; what it printed and started. */
async function run(args: string[]): Promise<Run> {
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-bench-options-"));
  const log = path.join(dir, "starts.log");
  try {
    const child = spawnProtected(process.execPath, args, {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", NODE_OPTIONS: `--import=${RECORDER}`, BENCH_STARTS_LOG: log },
    });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const code = await child.closed;
    let started = "";
    try {
      started = readFileSync(log, "utf8");
    } catch {
      /* nothing recorded */
    }
    return { code, stdout, stderr, started };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

t.test("the recorder sees a child process, a listener and a worker started through ES module imports", async (t) => {
  const script = [
    "import { execFileSync, spawn } from 'node:child_process'",
    "import { createServer } from 'node:net'",
    "import { Worker } from 'node:worker_threads'",
    "execFileSync('true')",
    "await new Promise((r) => spawn('true').on('close', r))",
    "const s = createServer(); await new Promise((r) => s.listen(0, '127.0.0.1', r)); s.close()",
    "await new Promise((r) => new Worker('1', { eval: true }).on('exit', r))",
  ].join("\n");
  const r = await run(["--input-type=module", "-e", script]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.started, /child process \(execFileSync\): true/);
  t.match(r.started, /child process: true/);
  t.match(r.started, /listener: 0/);
  t.match(r.started, /worker thread: 1/);
});

t.test("every bench/*.mjs: --help prints its options with their defaults, exit 0, starts nothing", async (t) => {
  t.ok(benches.length >= 10, `${benches.length} benches: ${benches.join(", ")}`);
  for (const [bench, r] of await eachBench((b) => run([path.join("bench", b), "--help"]))) {
    t.equal(r.code, 0, `${bench} --help: exit 0 (${r.stderr.trim()})`);
    t.equal(r.stderr, "", `${bench} --help: nothing on stderr`);
    t.match(r.stdout, new RegExp(`^usage: node bench/${bench.replace(".", "\\.")} \\[options\\]`), `${bench}: a usage line`);
    const options = r.stdout.split("\n").filter((l) => /^ {2}--/.test(l));
    t.ok(
      options.some((l) => l.startsWith("  --help")),
      `${bench}: --help is listed`,
    );
    for (const line of options.filter((l) => /^ {2}--[\w-]+ [^ ]/.test(l)))
      t.match(line, /\(default: [^)]+\)$/, `${bench}: ${line.trim().split(" ")[0]} shows its default`);
    t.equal(r.started, "", `${bench} --help started nothing`);
  }
});

t.test("every bench/*.mjs: an unknown option is one line on stderr and exit 2, and starts nothing", async (t) => {
  for (const [bench, r] of await eachBench((b) => run([path.join("bench", b), "--no-such-option", "3"]))) {
    t.equal(r.code, 2, `${bench} --no-such-option: exit 2`);
    t.equal(r.stdout, "", `${bench}: nothing on stdout`);
    const lines = r.stderr.split("\n").filter((l) => l !== "");
    t.equal(lines.length, 1, `${bench}: one line on stderr: ${JSON.stringify(r.stderr)}`);
    t.match(lines[0] ?? "", `bench/${bench}: unknown option --no-such-option`, `${bench}: names the option`);
    t.equal(r.started, "", `${bench} --no-such-option started nothing`);
  }
});

t.test("a bad value of a known option is refused the same way", async (t) => {
  const r = await run(["bench/run.mjs", "--runs", "many"]);
  t.equal(r.code, 2);
  t.equal(r.stderr, "bench/run.mjs: --runs must be a number ≥ 1, not 'many' (see --help)\n");
  t.equal(r.started, "");
  const loader = await run(["bench/replication.mjs", "--loader", "curl"]);
  t.equal(loader.code, 2);
  t.match(loader.stderr, /--loader must be wrk or autocannon, not 'curl'/);
  t.equal(loader.started, "");
});

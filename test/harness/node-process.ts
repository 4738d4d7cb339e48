import type { ChildProcess } from "node:child_process";
import { spawnProtected } from "./child-processes.js";
import { TEST_KEY, request } from "./http-client.js";
import { MAIN } from "./paths.js";
import { freePort } from "./ports.js";
import { workersOfRun } from "./run-workers.js";
import { sleep } from "./wait.js";

export interface NodeProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly port: number;
  readonly url: string;
  readonly env: Record<string, string>;
  output(): string;
  /** signal the node's whole process group */
  signal(signal: NodeJS.Signals): void;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL if still running, and wait for it */
  kill(): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;

// Re-exported where process tests have always found it.
export { runWorkers } from "./run-workers.js";

type SpawnOptions = {
  waitReady?: boolean;
  timeoutMs?: number;
  /** argv that runs the node, e.g. `ip netns exec <ns>` */
  wrap?: readonly string[];
  /** another build's main.js (an older release, for mixed-version clusters); default this checkout's */
  main?: string;
};

/**
 * Start `node dist/src/main.js` as its own process group and wait until /ready answers 200.
 * Ports the caller leaves to the harness come from freePort(), which another process can
 * take before the node binds (nodes listen exclusively): such a start is retried on new ports.
 */
export async function spawnNode(env: Record<string, string>, options: SpawnOptions = {}): Promise<NodeProcess> {
  const harnessPorts = env.PORT === undefined && env.PEER_PORT === undefined;
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnNodeOnce(env, options);
    } catch (err) {
      if (!harnessPorts || attempt === 3 || !/EADDRINUSE/.test((err as Error).message)) throw err;
    }
  }
}

async function spawnNodeOnce(env: Record<string, string>, options: SpawnOptions): Promise<NodeProcess> {
  const port = env.PORT !== undefined ? Number(env.PORT) : await freePort();
  const fullEnv: Record<string, string> = {
    HOST: "127.0.0.1",
    API_KEYS: TEST_KEY,
    LOG_LEVEL: "warn",
    // Tests read counters right after the requests they count; test/http/metrics.test.ts covers the cache.
    METRICS_CACHE_MS: "0",
    // The gRPC port's server: the suites run with either (GRPC_SERVER_IMPL=node-http2 npx tap ...).
    ...(process.env.GRPC_SERVER_IMPL === undefined ? {} : { GRPC_SERVER_IMPL: process.env.GRPC_SERVER_IMPL }),
    // .ci/run starts these nodes without WORKERS, then again with WORKERS=2 (run-workers.ts).
    ...workersOfRun(),
    ...(env.PEER_PORT === undefined ? { PEER_PORT: String(await freePort()) } : {}),
    ...env,
    PORT: String(port),
  };
  const argv = [...(options.wrap ?? []), process.execPath, options.main ?? MAIN];
  // Its own process group, killed with the test process however that ends (child-processes.ts).
  const child = spawnProtected(argv[0]!, argv.slice(1), { env: { PATH: process.env.PATH ?? "", ...fullEnv } });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  const handle: NodeProcess = {
    child,
    pid: child.pid!,
    port,
    url: `${env.TLS_CERT_FILE ? "https" : "http"}://${fullEnv.HOST}:${port}`,
    env: fullEnv,
    output: () => out,
    signal(signal) {
      child.signalGroup(signal);
    },
    exited,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) handle.signal("SIGKILL");
      await exited;
    },
  };
  if (options.waitReady !== false) {
    // A bound, not a speed claim: at a load average of ~23 on 2 cores a node took over 15 s to
    // answer /ready while other test files started theirs.
    const deadline = Date.now() + (options.timeoutMs ?? READY_TIMEOUT_MS);
    for (;;) {
      if (child.exitCode !== null) throw new Error(`node exited with ${child.exitCode} before ready:\n${out}`);
      try {
        const r = await request(handle.url + "/ready", { timeoutMs: 500 });
        if (r.status === 200) break;
      } catch {
        /* not listening yet */
      }
      if (Date.now() > deadline) {
        await handle.kill();
        throw new Error(`node not ready within ${options.timeoutMs ?? READY_TIMEOUT_MS} ms:\n${out}`);
      }
      await sleep(50);
    }
  }
  return handle;
}

export interface ToolProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  output(): string;
  stdout(): string;
  /** signal the tool's whole process group (the tool and every process it started) */
  signal(signal: NodeJS.Signals): void;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL the whole group if the tool still runs, and wait for it */
  kill(): Promise<void>;
}

/**
 * Start a command other than a node (a tool under dist/src/tools, a script) as its own
 * process group, with PATH and `env` only. The group dies with the test, as nodes do.
 */
export function spawnTool(argv: readonly string[], env: Record<string, string>, cwd?: string): ToolProcess {
  const child = spawnProtected(argv[0]!, argv.slice(1), { env: { PATH: process.env.PATH ?? "", ...env }, ...(cwd === undefined ? {} : { cwd }) });
  let out = "";
  let stdout = "";
  child.stdout!.on("data", (d: Buffer) => ((out += d.toString()), (stdout += d.toString())));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  const signal = (name: NodeJS.Signals) => child.signalGroup(name);
  const handle: ToolProcess = {
    child,
    pid: child.pid!,
    output: () => out,
    stdout: () => stdout,
    signal,
    exited,
    async kill() {
      signal("SIGKILL"); // the group: children the tool started may outlive it
      await exited;
    },
  };
  return handle;
}

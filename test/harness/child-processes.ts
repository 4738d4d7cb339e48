/**
 * The one way a test starts a process that runs on its own (spawn, fork): in a process group
 * of its own, remembered until it exits, and killed when the test process ends, whichever way
 * it ends. Two layers, because tap ends a test file that runs past its timeout with SIGALRM
 * and, if the file has not exited 500 ms later (a loaded machine), with SIGKILL:
 * - the test process's 'exit' and signal handlers (SIGTERM, SIGINT, SIGHUP, SIGALRM) kill every
 *   group it started, members and all;
 * - each process is started under `setpriv --pdeathsig KILL` (util-linux), so the kernel
 *   kills it when the test process dies, SIGKILL included, which no handler survives.
 * A node started outside this (test/cli's runMain) was found still listening 35 minutes
 * after such a run, adopted by init. test/harness/child-processes.process.test.ts holds each starter
 * to it, and fails on a test file that imports an asynchronous starter from
 * node:child_process itself (spawnSync and execFileSync are allowed: the test process waits
 * for them).
 */
import { spawn, type ChildProcess, type StdioOptions } from "node:child_process";
import { existsSync } from "node:fs";
import { constants as osConstants } from "node:os";
import { untapped } from "./untapped.js";

/** util-linux's setpriv, which every Debian and most Linux systems carry; without it only the handlers protect. */
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((f) => existsSync(f));

const live = new Set<ChildProcess>();

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    /* already gone */
  }
}

function killLive(): void {
  for (const child of live) killGroup(child, "SIGKILL");
}
process.on("exit", killLive);
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP", "SIGALRM"] as const) {
  process.on(signal, () => {
    killLive();
    process.exit(128 + osConstants.signals[signal]);
  });
}

export interface ProtectedOptions {
  env: NodeJS.ProcessEnv;
  cwd?: string;
  /** default: stdin ignored, stdout and stderr piped */
  stdio?: StdioOptions;
}

export interface ProtectedChild extends ChildProcess {
  /** the process has ended and its pipes are drained (its 'close'): exit code, or null after a signal */
  readonly closed: Promise<number | null>;
  /** signal its whole process group */
  signalGroup(signal: NodeJS.Signals): void;
}

/**
 * Start `command args` in a new process group, killed with the test process. The caller
 * stops it (signalGroup, or by letting it end); the registry forgets it when it exits.
 */
export function spawnProtected(command: string, args: readonly string[], options: ProtectedOptions): ProtectedChild {
  // setpriv sets the death signal and execs env, which execs the command: same pid, same process group.
  // env(1) takes tap's loader back out of it (untapped.ts).
  const untappedCommand = [...untapped(options.env), command, ...args];
  const argv = SETPRIV === undefined ? untappedCommand : [SETPRIV, "--pdeathsig", "KILL", "--", ...untappedCommand];
  const child = spawn(argv[0]!, argv.slice(1), { env: options.env, cwd: options.cwd, detached: true, stdio: options.stdio ?? ["ignore", "pipe", "pipe"] });
  if (child.pid !== undefined) {
    live.add(child);
    child.once("exit", () => live.delete(child));
  }
  const closed = new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve(code));
  });
  // A caller that only signals or reads output must not see an unhandled rejection.
  closed.catch(() => {});
  return Object.assign(child, { closed, signalGroup: (signal: NodeJS.Signals) => killGroup(child, signal) });
}

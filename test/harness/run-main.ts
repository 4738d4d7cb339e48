import { spawnProtected } from "./child-processes.js";
import { MAIN } from "./paths.js";

export interface MainRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Run `node dist/src/main.js <args>` to completion with exactly `env` (plus PATH), keeping
 * stdout and stderr apart. For commands that end by themselves (keygen, bad config); a
 * process still running after `timeoutMs` is killed (its group) and reported as such. The bound
 * is generous on purpose: a loaded 2-core machine takes seconds to start node; it is no speed claim.
 */
export function runMain(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<MainRun> {
  return new Promise((resolve, reject) => {
    // A run expected to fail may start a node instead: it is killed with the test process
    // however that ends, not only by the timer below (child-processes.ts).
    const child = spawnProtected(process.execPath, [MAIN, ...args], { env: { PATH: process.env.PATH ?? "", ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.signalGroup("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

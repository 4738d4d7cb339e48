import { spawn } from "node:child_process";
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
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { PATH: process.env.PATH ?? "", ...env },
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        /* gone */
      }
    }, timeoutMs);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

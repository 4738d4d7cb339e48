/**
 * No node outlives its test: a test process ended by a signal (tap's timeout sends SIGTERM)
 * takes its nodes' process groups with it, not only one that exits by itself.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { constants as osConstants } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { eventually } from "./wait.js";

const HOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/hold-node.js");

/** Running, and not a zombie left for an init that may not reap (containers). */
const alive = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]![0] !== "Z";
  } catch {
    return false;
  }
};

for (const signal of ["SIGTERM", "SIGINT", "SIGALRM"] as const) {
  t.test(`a test process ended by ${signal} kills the node it started`, async (t) => {
    const holder = spawn(process.execPath, [HOLDER], { stdio: ["ignore", "pipe", "inherit"], detached: true });
    t.teardown(() => {
      try {
        process.kill(-holder.pid!, "SIGKILL");
      } catch {
        /* gone */
      }
    });
    let out = "";
    holder.stdout.on("data", (d: Buffer) => (out += d.toString()));
    t.ok(await eventually(() => out.includes("\n"), 20_000), "the holder started a node");
    const nodePid = Number(out.trim());
    t.ok(alive(nodePid), `node ${nodePid} is running`);
    const exited = new Promise<number | null>((resolve) => holder.on("exit", (code) => resolve(code)));
    holder.kill(signal);
    t.equal(await exited, 128 + osConstants.signals[signal], "the holder exits with 128 + the signal's number");
    t.ok(await eventually(() => !alive(nodePid), 5_000), `node ${nodePid} is gone`);
  });
}

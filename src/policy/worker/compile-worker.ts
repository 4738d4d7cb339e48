/**
 * The compile worker's entry (a worker_threads script, never imported): compiles the files
 * of each message and posts the compiled policy (a structured clone, revived by
 * revivePolicy) or the refusal. It runs under the time and heap budget of off-loop.ts, so
 * whatever a file does to the compiler, the event loop and the node's heap are not where it
 * happens. One worker serves the compiles one after another, and is replaced when it breaks
 * a budget.
 */
import { parentPort } from "node:worker_threads";
import { PolicyError } from "../errors.js";
import type { PolicyFile } from "../files.js";
import { compilePolicy } from "../policy.js";

parentPort!.on("message", ({ id, files }: { id: number; files: PolicyFile[] }) => {
  try {
    parentPort!.postMessage({ id, policy: compilePolicy(files) });
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    parentPort!.postMessage({ id, file: err.file, problem: err.problem });
  }
});

import { Worker } from "node:worker_threads";
import { PolicyError } from "../errors.js";
import type { PolicyFile } from "../files.js";
import { revivePolicy } from "../policy.js";
import type { Policy } from "../types.js";

/**
 * The budget of one compile, off the event loop (compile-worker.ts): past either, the
 * policy is refused and the worker ended; the node never runs out of heap for a policy.
 */
export const POLICY_COMPILE_BUDGET = Object.freeze({
  ms: 30_000,
  heapMb: 256,
});

const WORKER = new URL("./compile-worker.js", import.meta.url);

interface Reply {
  id: number;
  policy?: unknown;
  file?: string;
  problem?: string;
}

/** The worker that compiles, kept between compiles (starting one loads the compiler again), replaced after a budget is broken. */
let current: { worker: Worker; waiting: Map<number, (reply: Reply | PolicyError) => void> } | undefined;
let nextId = 0;

function compiler(budget: typeof POLICY_COMPILE_BUDGET): NonNullable<typeof current> {
  if (current !== undefined) return current;
  const worker = new Worker(WORKER, {
    // invariant: a compile never uses more than budget.heapMb of heap, whatever the files hold
    resourceLimits: { maxOldGenerationSizeMb: budget.heapMb, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 },
  });
  const self = { worker, waiting: new Map<number, (reply: Reply | PolicyError) => void>() };
  worker.on("message", (reply: Reply) => {
    self.waiting.get(reply.id)?.(reply);
    self.waiting.delete(reply.id);
    if (self.waiting.size === 0) worker.unref();
  });
  const fail = (err: PolicyError) => {
    if (current === self) current = undefined;
    for (const done of self.waiting.values()) done(err);
    self.waiting.clear();
  };
  worker.on("error", (err: Error & { code?: string }) => {
    const problem =
      err.code === "ERR_WORKER_OUT_OF_MEMORY"
        ? `needs more than ${budget.heapMb} MB of heap to compile (the memory budget of a policy compile)`
        : `could not be compiled (${err.message.split("\n", 1)[0]})`;
    fail(new PolicyError("", problem));
  });
  worker.on("exit", () => fail(new PolicyError("", "the compile ended without an answer")));
  // held only while a compile is asked of it: an idle compiler never keeps a process alive
  worker.unref();
  current = self;
  return self;
}

/** Starts the compiler now, so that the first edit does not wait for it to load (a watcher starts it). */
export function warmCompiler(budget = POLICY_COMPILE_BUDGET): void {
  compiler(budget);
}

/**
 * The policy of files already read, compiled in a worker thread under a time and heap
 * budget (POLICY_COMPILE_BUDGET): what a live edit costs the event loop is the copy of the
 * result, never the YAML parse or the compile. Rejects with a PolicyError naming the file
 * and the problem, or `label` (POLICY_PATH) and the budget the compile went past; a worker
 * past a budget is ended, and the next compile starts another.
 */
export function compileOffLoop(files: readonly PolicyFile[], label: string, budget = POLICY_COMPILE_BUDGET): Promise<Policy> {
  const c = compiler(budget);
  const id = nextId++;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      c.waiting.delete(id);
      c.worker.unref();
      if (current === c) current = undefined;
      void c.worker.terminate();
      reject(new PolicyError(label, `took more than ${budget.ms} ms to compile (the time budget of a policy compile)`));
    }, budget.ms);
    timer.unref();
    c.waiting.set(id, (reply) => {
      clearTimeout(timer);
      if (reply instanceof PolicyError) return reject(new PolicyError(label, reply.problem));
      if (reply.policy === undefined) return reject(new PolicyError(reply.file ?? label, reply.problem ?? "refused"));
      try {
        resolve(revivePolicy(reply.policy));
      } catch (err) {
        reject(new PolicyError(label, `the compiled policy could not be read back (${(err as Error).message})`));
      }
    });
    c.worker.ref();
    c.worker.postMessage({ id, files });
  });
}

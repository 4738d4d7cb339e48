/**
 * The WORKERS of this test run (docs/architecture.md, Threads). .ci/run runs the suite with
 * none set (every node a single thread) and then its node-starting files again with
 * WORKERS=2 (docs/development.md, "The WORKERS=2 lane"); the harness hands the variable to
 * every node it starts, in a process or in this one. No node:child_process here: unit tests
 * import it too (test/unit-split.test.ts).
 */

/** The WORKERS every node of this run gets: for the few assertions that hold only for a single-thread door. */
export const runWorkers = (): number => Number(process.env.WORKERS ?? "1");

/** WORKERS for a node's environment, when the run sets it; a test's own WORKERS comes after and wins. */
export const workersOfRun = (): Record<string, string> => (process.env.WORKERS === undefined ? {} : { WORKERS: process.env.WORKERS });

/** Why a pipelining test skips itself with WORKERS > 1 (a capability of WORKERS=1 only: docs/security.md, item 4). */
export const PIPELINING_SKIP = "pipelined: with WORKERS > 1 uWS closes the connection at the second request (docs/security.md, item 4)";

/** `skip` for a test that pipelines: false on a single-thread run, the reason otherwise. */
export const pipeliningSkip = (): string | false => (runWorkers() > 1 ? PIPELINING_SKIP : false);

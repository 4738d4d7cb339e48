import { loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { startNode, type RunningNode } from "../../src/node.js";
import { closeAgents, TEST_KEY } from "./http-client.js";
import { workersOfRun } from "./run-workers.js";

export interface TestNode {
  url: string;
  node: RunningNode;
  stop(): Promise<void>;
}

/** A real node (real uWS listener on 127.0.0.1, free port) inside the test process. */
export async function startTestNode(env: Record<string, string> = {}): Promise<TestNode> {
  const config = loadConfig({
    HOST: "127.0.0.1",
    PORT: "0",
    API_KEYS: TEST_KEY,
    LOG_LEVEL: "silent",
    DRAIN_TIMEOUT_MS: "2000",
    METRICS_CACHE_MS: "0",
    // .ci/run starts these nodes without WORKERS, then again with WORKERS=2 (run-workers.ts).
    ...workersOfRun(),
    ...env,
  });
  const node = await startNode(config, createLogger("silent"));
  const scheme = config.tlsCertFile !== undefined ? "https" : "http";
  return { url: `${scheme}://127.0.0.1:${node.port}`, node, stop: () => node.stop() };
}

/**
 * One real node shared by every test of a file: started before the first test, stopped
 * (and the HTTP agents closed) after the last. The returned object is filled in at start.
 */
export function useTestNode(t: { before(fn: () => Promise<void>): void; teardown(fn: () => Promise<void>): void }, env: Record<string, string> = {}): TestNode {
  const shared = {} as TestNode;
  t.before(async () => {
    Object.assign(shared, await startTestNode(env));
  });
  t.teardown(async () => {
    await shared.stop?.();
    closeAgents();
  });
  return shared;
}

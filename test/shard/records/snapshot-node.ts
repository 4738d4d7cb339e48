/** What the snapshot tests share: a state directory and a node that logs at info, both gone with the test. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Test } from "tap";
import { spawnNode, type NodeProcess } from "../../harness/node-process.js";

/** A fresh STATE_DIR, removed when `t` ends. */
export function stateDir(t: Test): string {
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-state-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A node with LOG_LEVEL=info (the tests read its restore lines), killed when `t` ends. */
export async function node(t: Test, env: Record<string, string>, timeoutMs?: number): Promise<NodeProcess> {
  const n = await spawnNode({ LOG_LEVEL: "info", ...env }, timeoutMs === undefined ? {} : { timeoutMs });
  t.teardown(() => n.kill());
  return n;
}

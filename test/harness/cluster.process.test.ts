import { readFileSync, readdirSync } from "node:fs";
import { randomUUID } from "node:crypto";
import t from "tap";
import { startCluster } from "./cluster.js";

/** pids of live processes whose environment holds `marker` */
function processesWith(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, "latin1").split("\0").includes(marker)) pids.push(Number(entry));
    } catch {
      /* gone, or not ours to read */
    }
  }
  return pids;
}

// A CI run hung here: one node of a cluster failed to start, the two that had started were
// never killed, and their pipes kept the test file alive until tap's timeout, which reported
// a timeout instead of the failure.
t.test("a cluster whose node cannot start fails with that node's error and leaves no node running", async (t) => {
  const marker = `RINGLIMIT_TEST_MARKER=${randomUUID()}`;
  const [name, value] = marker.split("=") as [string, string];
  await t.rejects(
    startCluster(3, { [name]: value }, (i): Record<string, string> => (i === 1 ? { PEER_TIMEOUT_MS: "not-a-number" } : {})),
    /PEER_TIMEOUT_MS/,
    "the failing node's own message",
  );
  t.same(processesWith(marker), [], "the nodes that did start were killed");
});

import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import t, { type Test } from "tap";
import { closeAgents } from "../../harness/http-client.js";
import { CLUSTER_SECRET, hit, metric } from "../../harness/cluster.js";
import type { NodeProcess } from "../../harness/node-process.js";
import { sleep } from "../../harness/wait.js";
import { ALGORITHM_NAMES } from "../../../src/algorithms/index.js";
import { node, stateDir } from "./snapshot-node.js";

t.teardown(closeAgents);

const ALGORITHMS = ALGORITHM_NAMES;
const YEAR = 31536000; // no window boundary or refill worth a request during the test
const KEYS = ALGORITHMS.flatMap((algorithm) => [0, 1, 2].map((k) => ({ algorithm, id: `${algorithm}-${k}`, used: 2 + k * 3 })));

async function count(t: Test, n: NodeProcess): Promise<void> {
  for (const key of KEYS) {
    for (let i = 0; i < key.used; i++) {
      const r = await hit(n, key.id, 100, { algorithm: key.algorithm, duration: YEAR });
      if (r.status !== 200) t.fail(`setup request answered ${r.status}`);
    }
  }
}

async function expectCounts(t: Test, n: NodeProcess, label: string): Promise<void> {
  for (const key of KEYS) {
    const r = await hit(n, key.id, 100, { algorithm: key.algorithm, duration: YEAR });
    t.equal(r.json.data.count, key.used + 1, `${label}: ${key.algorithm} ${key.id} keeps its ${key.used} requests`);
  }
}

t.test("single node, SIGTERM: every state is written at stop and loaded at start, every algorithm", async (t) => {
  const dir = stateDir(t);
  const first = await node(t, { STATE_DIR: dir, SNAPSHOT_INTERVAL_MS: "3600000" });
  await count(t, first);
  first.signal("SIGTERM");
  t.same(await first.exited, { code: 0, signal: null }, "exit code 0");
  const second = await node(t, { STATE_DIR: dir });
  t.match(second.output(), new RegExp(`"owned":${KEYS.length},"replicas":0,"expired":0.*restored states from snapshot`), `${KEYS.length} states restored`);
  t.equal(await metric(second, "ringlimit_keys_restored_total"), KEYS.length);
  await expectCounts(t, second, "after SIGTERM and restart");
});

t.test("single node, SIGKILL: the periodic snapshot keeps what was counted before it", async (t) => {
  const dir = stateDir(t);
  const first = await node(t, { STATE_DIR: dir, SNAPSHOT_INTERVAL_MS: "200" });
  await count(t, first);
  // Wait for a snapshot begun after the last counted request: the metric says when one
  // ended, so wait for one ending after that, then for the next (which began after it).
  const deadline = Date.now() + 5000;
  let after = Date.now() / 1000;
  for (let snapshots = 0; snapshots < 2 && Date.now() < deadline;) {
    const last = (await metric(first, "ringlimit_snapshot_last_success_timestamp_seconds")) ?? 0;
    if (last > after) {
      after = last;
      snapshots++;
    } else await sleep(50);
  }
  t.ok(((await metric(first, "ringlimit_snapshot_bytes")) ?? 0) > KEYS.length * 30, "a snapshot holding the states was written");
  first.signal("SIGKILL");
  t.same(await first.exited, { code: null, signal: "SIGKILL" });
  const second = await node(t, { STATE_DIR: dir });
  await expectCounts(t, second, "after SIGKILL and restart");
});

t.test("a corrupt snapshot is refused with a clear log, moved aside, and the node starts empty", async (t) => {
  const dir = stateDir(t);
  const file = path.join(dir, "ringlimit.snapshot");
  writeFileSync(file, Buffer.concat([Buffer.from("RLSNAPSH"), Buffer.alloc(200, 7)]));
  const n = await node(t, { STATE_DIR: dir });
  t.match(n.output(), /"reason":"format version 1799; this build reads versions 3 to 4".*"snapshot refused: starting without it"/);
  t.ok(existsSync(file + ".refused"), "the refused file is kept aside for inspection");
  const r = await hit(n, "fresh", 5);
  t.equal(r.json.data.count, 1, "serving, from an empty table");
});

t.test("a snapshot of another cluster is refused (CLUSTER_SECRET differs)", async (t) => {
  const dir = stateDir(t);
  const first = await node(t, { STATE_DIR: dir, SNAPSHOT_INTERVAL_MS: "3600000" });
  await count(t, first);
  first.signal("SIGTERM");
  await first.exited;
  const other = await node(t, { STATE_DIR: dir, CLUSTER_SECRET });
  t.match(other.output(), /"reason":"foreign: written with another key \(another CLUSTER_SECRET, or another node key\)"/);
  t.equal((await hit(other, KEYS[0]!.id, 100, { duration: YEAR })).json.data.count, 1, "nothing of it was loaded");
});

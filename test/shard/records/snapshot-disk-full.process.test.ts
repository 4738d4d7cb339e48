// Issue 22, item 5: a full disk never replaces the good snapshot. A real node writes to a real
// 64 KiB tmpfs that fills up mid-write (write(2) returns short, then ENOSPC).
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { closeAgents } from "../../harness/http-client.js";
import { hit, metric } from "../../harness/cluster.js";
import { canMountTmpfs, fillUpTo, mountTinyTmpfs } from "../../harness/tiny-tmpfs.js";
import { eventually } from "../../harness/wait.js";
import { SNAPSHOT_FILE } from "../../../src/shard/records/snapshotter.js";
import { node } from "./snapshot-node.js";

t.teardown(closeAgents);

/** The body length a snapshot's header declares, and the header's own length: a whole file is exactly their sum. */
function declaredBytes(file: Buffer): number {
  return file.readUInt16LE(10) + file.readDoubleLE(24);
}

t.test(
  "disk full: the write fails, is counted and logged, the previous snapshot stays whole, and a restart restores it",
  { skip: !canMountTmpfs() && "mounting a tmpfs needs root (CAP_SYS_ADMIN): this test runs where it can" },
  async (t) => {
    const dir = mountTinyTmpfs(t, "64k");
    const file = path.join(dir, SNAPSHOT_FILE);
    const first = await node(t, { STATE_DIR: dir, SNAPSHOT_INTERVAL_MS: "3600000" });
    for (let i = 0; i < 3; i++) t.equal((await hit(first, "kept", 100)).status, 200);
    first.signal("SIGTERM");
    t.same(await first.exited, { code: 0, signal: null });
    const firstSnapshot = readFileSync(file);
    t.equal(firstSnapshot.length, declaredBytes(firstSnapshot), "a whole snapshot to start from");

    const second = await node(t, { STATE_DIR: dir, SNAPSHOT_INTERVAL_MS: "300" });
    t.match(second.output(), /"owned":1,.*restored states from snapshot/);
    // ~200 states of ~55 bytes: a snapshot of ~11 KB, written while there is room.
    for (let i = 0; i < 200; i++) await hit(second, `filler-${i}`, 100);
    const counted = Date.now() / 1000;
    t.ok(
      await eventually(async () => ((await metric(second, "ringlimit_snapshot_last_success_timestamp_seconds")) ?? 0) > counted + 0.5, 15_000),
      "a snapshot of all 201 states was written",
    );
    // Then the disk fills: 4 KiB left, so the next write(2) of ~11 KB is cut short.
    fillUpTo(dir, 4096);
    t.ok(await eventually(async () => ((await metric(second, "ringlimit_snapshot_failures_total")) ?? 0) >= 1, 15_000), "the failed write is counted");
    const good = readFileSync(file);
    t.ok(await eventually(async () => ((await metric(second, "ringlimit_snapshot_failures_total")) ?? 0) >= 2, 15_000), "and the next one");
    const failures = second
      .output()
      .split("\n")
      .filter((l) => l.includes("snapshot write failed; the previous snapshot stays in place"));
    t.ok(failures.length >= 2, `one log line per failed write (${failures.length})`);
    t.match(failures[0], /"code":"ENOSPC"/, "saying the disk is full");
    const now = readFileSync(file);
    t.ok(now.equals(good), "the snapshot on disk did not change");
    t.equal(now.length, declaredBytes(now), `and is whole (${now.length} bytes, as its header says)`);
    second.signal("SIGKILL");
    await second.exited;

    const third = await node(t, { STATE_DIR: dir });
    t.match(third.output(), /"owned":201,.*restored states from snapshot/, "the previous snapshot restores, every state");
    t.equal((await hit(third, "kept", 100)).json.data.count, 4, "with the counts it held");
    t.same(readdirSync(dir).sort(), ["filler", "ringlimit.node-key", SNAPSHOT_FILE], "no temporary file is left (one a kill interrupted is removed at start)");
  },
);

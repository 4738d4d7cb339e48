// Issue 22, item 6: whoever can write STATE_DIR can neither forge counts nor stop a node from
// becoming ready. Each case starts a real node on a crafted STATE_DIR: real files, links, FIFOs.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { closeAgents } from "../../harness/http-client.js";
import { hit } from "../../harness/cluster.js";
import { generateClusterSecret, clusterKey } from "../../../src/peer/link/cluster-secret.js";
import { snapshotKey, writeSnapshot } from "../../../src/shard/records/snapshot-file.js";
import { NODE_KEY_FILE } from "../../../src/shard/records/node-key.js";
import { SNAPSHOT_FILE } from "../../../src/shard/records/snapshotter.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import type { TableCopy } from "../../../src/shard/table/state-table.js";
import type { NodeProcess } from "../../harness/node-process.js";
import { node, stateDir } from "./snapshot-node.js";

t.teardown(closeAgents);

/** Ten requests at limit 5: how many were allowed. */
async function allowedOfTen(n: NodeProcess, id: string): Promise<number> {
  let allowed = 0;
  for (let i = 0; i < 10; i++) if ((await hit(n, id, 5)).json.data.allowed === true) allowed++;
  return allowed;
}

const FIXED = 0;
const HOUR = 3600;

t.test("a count edited in the node's own snapshot is refused (a MAC, not a checksum): nothing of it loads", async (t) => {
  const dir = stateDir(t);
  const first = await node(t, { STATE_DIR: dir, SNAPSHOT_INTERVAL_MS: "3600000" });
  t.equal(await allowedOfTen(first, "victim"), 5, "the victim used its limit");
  first.signal("SIGTERM");
  await first.exited;
  t.equal(statSync(path.join(dir, NODE_KEY_FILE)).mode & 0o777, 0o600, "alone, the node signs with a key of its own, mode 0600");
  // The attacker sets the count of the fixed window to −1,000,000 in place.
  const file = path.join(dir, SNAPSHOT_FILE);
  const bytes = readFileSync(file);
  const key = Buffer.from(stateKeyOf(FIXED, HOUR, ringKeyOf("test", "victim")));
  const at = bytes.indexOf(key);
  t.ok(at > 0, "the victim's record is in the file");
  bytes.writeDoubleBE(-1_000_000, at + key.length + 8);
  writeFileSync(file, bytes);
  const second = await node(t, { STATE_DIR: dir });
  t.match(second.output(), /"reason":"not authentic: the MAC does not match[^"]*".*"snapshot refused: starting without it"/, "refused, saying why");
  t.equal(await allowedOfTen(second, "victim"), 5, "the forged count is not loaded: 5 of 10 allowed at limit 5");
});

t.test("an authentic snapshot's records out of the contract's bounds are not loaded; the sound ones are", async (t) => {
  const dir = stateDir(t);
  const secret = generateClusterSecret();
  const now = Date.now();
  const D = HOUR * 1000;
  const windowStart = now - (now % D);
  const expiry = Math.ceil((windowStart + D) / 1000);
  const records: [string, number, number, number, number][] = [
    [stateKeyOf(FIXED, HOUR, ringKeyOf("test", "negative")), windowStart, -1_000_000, 0, expiry],
    [stateKeyOf(FIXED, HOUR, ringKeyOf("test", "nan")), windowStart, Number.NaN, 0, expiry],
    [stateKeyOf(FIXED, 31_536_001, ringKeyOf("test", "too-long")), windowStart, 1, 0, expiry],
    [stateKeyOf(FIXED, HOUR, ringKeyOf("test", "years")), windowStart, 1, 0, Math.ceil(now / 1000) + 5 * 365 * 86400],
    [stateKeyOf(FIXED, HOUR, ringKeyOf("test", "sound")), windowStart, 3, 0, expiry],
  ];
  const copy: TableCopy = {
    keys: records.map((r) => r[0]),
    a: Float64Array.from(records.map((r) => r[1])),
    b: Float64Array.from(records.map((r) => r[2])),
    c: Float64Array.from(records.map((r) => r[3])),
    expiry: Uint32Array.from(records.map((r) => r[4])),
    origin: Uint32Array.from(records.map((_, i) => 1000 + i)),
    born: Uint32Array.from(records.map(() => Math.floor(windowStart / 1000))),
  };
  // Written with the cluster's own key: what a build with a bug, or someone holding the key, could write.
  await writeSnapshot(path.join(dir, SNAPSHOT_FILE), { key: snapshotKey(clusterKey(secret)), nodeId: "x" }, copy, undefined, now);
  const n = await node(t, { STATE_DIR: dir, CLUSTER_SECRET: secret });
  t.match(n.output(), /"invalid":4,.*"snapshot records out of the request contract's bounds were not loaded"/, "4 records refused, in one line");
  t.match(n.output(), /"owned":1,.*"restored states from snapshot"/, "the sound one loaded");
  t.equal((await hit(n, "sound", 100)).json.data.count, 4, "with its 3 requests");
  t.equal(await allowedOfTen(n, "negative"), 5, "a count of -1,000,000 is not loaded: 5 of 10 allowed at limit 5");
  t.equal(await allowedOfTen(n, "nan"), 5, "nor NaN");
  t.equal((await hit(n, "years", 5)).json.data.count, 1, "nor an expiry years ahead");
});

t.test("a symbolic link to /dev/zero as the snapshot: refused at once, the node becomes ready", async (t) => {
  const dir = stateDir(t);
  symlinkSync("/dev/zero", path.join(dir, SNAPSHOT_FILE));
  const started = Date.now();
  const n = await node(t, { STATE_DIR: dir }, 20_000);
  t.match(n.output(), /"reason":"not a regular file: a symbolic link".*"snapshot refused: starting without it"/);
  t.ok(Date.now() - started < 20_000, `ready in ${Date.now() - started} ms`);
  t.equal((await hit(n, "fresh", 5)).json.data.count, 1, "serving, from an empty table");
});

t.test("a FIFO as the snapshot: refused at once, never waited on, the node becomes ready", async (t) => {
  const dir = stateDir(t);
  execFileSync("mkfifo", [path.join(dir, SNAPSHOT_FILE)]);
  const n = await node(t, { STATE_DIR: dir }, 20_000);
  t.match(n.output(), /"reason":"not a regular file: a FIFO".*"snapshot refused: starting without it"/);
  t.equal((await hit(n, "fresh", 5)).json.data.count, 1, "serving");
});

t.test("a 1.5 GiB snapshot on a node whose tables could not have written it: refused by its size, at once", async (t) => {
  const dir = stateDir(t);
  const file = path.join(dir, SNAPSHOT_FILE);
  writeFileSync(file, "");
  truncateSync(file, 1.5 * 1024 ** 3); // sparse: no disk used
  const started = Date.now();
  const n = await node(t, { STATE_DIR: dir, MAX_MEMORY_MB: "16" }, 20_000);
  t.match(n.output(), /"reason":"too large: 1610612736 bytes, more than the \d+ this node's MAX_KEYS and MAX_MEMORY_MB could have written"/);
  t.ok(Date.now() - started < 20_000, `ready in ${Date.now() - started} ms`);
  t.ok(existsSync(file + ".refused"), "moved aside for inspection");
});

t.test("a link planted at the temporary file's name is never written through", async (t) => {
  const dir = stateDir(t);
  const outside = stateDir(t);
  const victim = path.join(outside, "precious");
  writeFileSync(victim, "precious data");
  symlinkSync(victim, path.join(dir, SNAPSHOT_FILE + ".tmp"));
  const first = await node(t, { STATE_DIR: dir, SNAPSHOT_INTERVAL_MS: "3600000" });
  for (let i = 0; i < 3; i++) await hit(first, "kept", 100);
  first.signal("SIGTERM");
  t.same(await first.exited, { code: 0, signal: null });
  t.equal(readFileSync(victim, "utf8"), "precious data", "the link's target is untouched");
  t.notOk(existsSync(path.join(dir, SNAPSHOT_FILE + ".tmp")), "the planted link was removed at start");
  const second = await node(t, { STATE_DIR: dir });
  t.equal((await hit(second, "kept", 100)).json.data.count, 4, "the snapshot was written where it belongs and restores");
});

import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { canMountTmpfs, fillUpTo, mountTinyTmpfs } from "../../harness/tiny-tmpfs.js";
import { ALGORITHMS, newStep } from "../../../src/algorithms/index.js";
import { SNAPSHOT_FORMAT_VERSION, SnapshotRefused, readSnapshot, snapshotKey, writeSnapshot, type SnapshotIdentity } from "../../../src/shard/records/snapshot-file.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { StateTable, type StoredState } from "../../../src/shard/table/state-table.js";

const T0 = 1_800_000_000_000;
const IDENTITY: SnapshotIdentity = { key: snapshotKey(Buffer.alloc(32, 1)), nodeId: "127.0.0.1:7001" };

function tempDir(t: Test): string {
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-snapshot-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A table with `n` keys spread over every algorithm, non-ASCII keys included. */
function filledTable(n: number): StateTable {
  const table = new StateTable(n + 10, T0);
  const out = newStep();
  for (let i = 0; i < n; i++) {
    const alg = ALGORITHMS[i % ALGORITHMS.length]!;
    const key = stateKeyOf(alg.code, 3600, ringKeyOf("ns.prodé", `用户-${i}`));
    for (let k = 0; k <= i % 5; k++) table.decide(key, alg, 100, 3_600_000, T0 + k, out);
  }
  return table;
}

function contentsOf(table: StateTable): Map<string, StoredState> {
  const m = new Map<string, StoredState>();
  table.forEach((key, s) => m.set(key, { ...s }));
  return m;
}

async function readAll(file: string, identity = IDENTITY) {
  const owned = new Map<string, StoredState>();
  const replicas = new Map<string, StoredState>();
  const contents = await readSnapshot(file, identity, (key, state, replica) => (replica ? replicas : owned).set(key, state));
  return { contents, owned, replicas };
}

t.test("owned and replica states round-trip exactly, origins included; no temporary file is left", async (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, "ringlimit.snapshot");
  const owned = filledTable(5000);
  const replicas = filledTable(300);
  const written = await writeSnapshot(file, IDENTITY, owned.copy(), replicas.copy(), T0);
  t.equal(written.keys, 5300);
  t.same(readdirSync(dir), ["ringlimit.snapshot"], "only the snapshot itself: the .tmp was renamed");
  const back = await readAll(file);
  t.same(back.owned, contentsOf(owned), "owned states, exactly");
  t.same(back.replicas, contentsOf(replicas), "replica states, exactly, and told apart");
  t.match(back.contents, { nodeId: "127.0.0.1:7001", writtenAt: T0, owned: 5000, replicas: 300, bytes: written.bytes });
});

t.test("an empty table writes a valid empty snapshot; a missing file is no snapshot", async (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, "s");
  t.equal(await readSnapshot(file, IDENTITY, () => t.fail("no record")), undefined, "no file: undefined");
  await writeSnapshot(file, IDENTITY, new StateTable(10, T0).copy(), undefined, T0);
  const back = await readAll(file);
  t.equal(back.owned.size + back.replicas.size, 0);
});

t.test("a damaged, truncated, foreign or unknown file is refused before any state is loaded", async (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, "good");
  await writeSnapshot(file, IDENTITY, filledTable(2000).copy(), undefined, T0);
  const good = readFileSync(file);
  const cases: [string, Buffer, RegExp, SnapshotIdentity?][] = [
    ["a flipped byte in the body", flip(good, good.length - 100), /not authentic: the MAC does not match/],
    ["a flipped byte in the header (its record count)", flip(good, 13), /not authentic: the MAC does not match/],
    ["a flipped byte in the MAC", flip(good, 58 + 14 + 5), /not authentic: the MAC does not match/],
    ["cut short", good.subarray(0, good.length - 7), /truncated/],
    ["cut inside the header", good.subarray(0, 30), /bad magic|bad header length/],
    ["with bytes appended", Buffer.concat([good, Buffer.from([1, 2, 3])]), /truncated/],
    ["not a snapshot", Buffer.from("hello, this is some other file that happens to be long enough to have a header"), /not a ringlimit snapshot/],
    ["empty", Buffer.alloc(0), /not a ringlimit snapshot/],
    ["of a future format", withVersion(good, SNAPSHOT_FORMAT_VERSION + 1), new RegExp(`format version ${SNAPSHOT_FORMAT_VERSION + 1}`)],
    ["of the checksummed format 2", withVersion(good, 2), /format version 2; this build reads version 3/],
    ["written with another key", good, /foreign: written with another key/, { key: snapshotKey(Buffer.alloc(32, 2)), nodeId: "x" }],
  ];
  for (const [name, bytes, reason, identity] of cases) {
    const bad = path.join(dir, "bad");
    writeFileSync(bad, bytes);
    let visited = 0;
    const err = await readSnapshot(bad, identity ?? IDENTITY, () => visited++).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.type(err, SnapshotRefused, `${name}: refused`);
    t.match((err as Error).message, reason, `${name}: ${(err as Error).message}`);
    t.equal(visited, 0, `${name}: no state loaded`);
  }
});

t.test(
  "disk full mid-write: a short write is not taken for a whole one; the write fails and the previous snapshot stays whole",
  { skip: !canMountTmpfs() && "mounting a tmpfs needs root (CAP_SYS_ADMIN): this test runs where it can" },
  async (t) => {
    const mount = mountTinyTmpfs(t);
    const file = path.join(mount, "ringlimit.snapshot");
    const small = filledTable(50);
    await writeSnapshot(file, IDENTITY, small.copy(), undefined, T0);
    const before = readFileSync(file);
    fillUpTo(mount, 8192);
    // ~150 KB in one 256 KiB chunk: one write(2), which the kernel cuts to the 8 KiB left.
    const big = filledTable(2500);
    const err = await writeSnapshot(file, IDENTITY, big.copy(), undefined, T0 + 1).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.equal((err as NodeJS.ErrnoException | undefined)?.code, "ENOSPC", "the kernel's disk-full error reaches the caller");
    t.same(readdirSync(mount).sort(), ["filler", "ringlimit.snapshot"], "the partial temporary file was removed");
    t.ok(readFileSync(file).equals(before), "the previous snapshot is untouched");
    t.same((await readAll(file)).owned, contentsOf(small), "and still loads");
  },
);

t.test("a directory that cannot be written: the error reaches the caller, nothing is left behind", async (t) => {
  const dir = tempDir(t);
  const notADir = path.join(dir, "file");
  writeFileSync(notADir, "x");
  const err = await writeSnapshot(path.join(notADir, "ringlimit.snapshot"), IDENTITY, filledTable(10).copy(), undefined, T0).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.equal((err as NodeJS.ErrnoException | undefined)?.code, "ENOTDIR");
  mkdirSync(path.join(dir, "sub"));
  t.same(readdirSync(dir).sort(), ["file", "sub"]);
});

function flip(buf: Buffer, at: number): Buffer {
  const copy = Buffer.from(buf);
  copy[at]! ^= 0x40;
  return copy;
}

function withVersion(buf: Buffer, version: number): Buffer {
  const copy = Buffer.from(buf);
  copy.writeUInt16LE(version, 8);
  return copy;
}

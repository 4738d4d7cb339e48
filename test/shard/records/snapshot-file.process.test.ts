import { createHmac } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { canMountTmpfs, fillUpTo, mountTinyTmpfs } from "../../harness/tiny-tmpfs.js";
import { ALGORITHMS, newStep } from "../../../src/algorithms/index.js";
import {
  SNAPSHOT_FORMAT_VERSION,
  SnapshotRefused,
  readSnapshot,
  snapshotKey,
  writeSnapshot,
  type SnapshotIdentity,
} from "../../../src/shard/records/snapshot-file.js";
import type { FineRecord } from "../../../src/shard/records/fine-records.js";
import { admitSnapshotState } from "../../../src/shard/records/state-check.js";
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

t.test(
  "a window carried into the next one (a skewed hand-off) is written as begun at the write and read back into that window; a start after the write is refused",
  async (t) => {
    const dir = tempDir(t);
    const file = path.join(dir, "ringlimit.snapshot");
    const D = 60_000;
    const now = T0 + 40_000; // T0 is a window start
    const table = new StateTable(10, T0);
    const fw = stateKeyOf(0, 60, ringKeyOf("ns", "carried"));
    const sw = stateKeyOf(1, 60, ringKeyOf("ns", "carried"));
    table.set(fw, { a: T0 + D, b: 15, c: 0, expiresAt: (T0 + 2 * D) / 1000, origin: 7, born: T0 / 1000 });
    table.set(sw, { a: T0 + D, b: 6, c: 9, expiresAt: (T0 + 3 * D) / 1000, origin: 7, born: T0 / 1000 });
    await writeSnapshot(file, IDENTITY, table.copy(), undefined, now);
    const back = (await readAll(file)).owned;
    t.equal(back.get(fw)!.a, now, "no start after the write in the file");
    t.equal(back.get(sw)!.a, now, "sliding windows too");
    for (const key of [fw, sw]) {
      const restored = admitSnapshotState(key, back.get(key)!, now + 5000);
      t.not(restored, "invalid", "loaded");
      t.equal((restored as StoredState).a, T0 + D, "back in the window it was carried into, counted until its end");
      t.equal((restored as StoredState).b, key === fw ? 15 : 6, "with its count");
    }
    t.equal(
      admitSnapshotState(fw, { a: T0 + D, b: 15, c: 0, expiresAt: (T0 + 2 * D) / 1000, origin: 7, born: T0 / 1000 }, now + 5000),
      "invalid",
      "a record stamped a window ahead of the load is refused, like a peer's",
    );
  },
);

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
    ["of the checksummed format 2", withVersion(good, 2), /format version 2; this build reads versions 3 to 4/],
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

/** `buf` (a format 4 file without overlays) as format 3 wrote it: version 3, the MAC again. */
function asFormat3(buf: Buffer, identity: SnapshotIdentity): Buffer {
  const copy = Buffer.from(buf);
  const headerLength = copy.readUInt16LE(10);
  copy.writeUInt16LE(3, 8);
  const body = createHmac("sha256", identity.key.body).update(copy.subarray(headerLength)).digest();
  createHmac("sha256", identity.key.header)
    .update(copy.subarray(0, headerLength - 32))
    .update(body)
    .digest()
    .copy(copy, headerLength - 32);
  return copy;
}

t.test("format 4: owned concurrency states' fine lapses after the records, read back as written; a file of format 3 still loads", async (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, "fine");
  const table = filledTable(50);
  const key = stateKeyOf(4, 8, ringKeyOf("conc", "lapse"));
  const fine = { s: [1_800_000_008, 1_800_000_009], m: [1, 2], a: 0, b: 0, c: 0 };
  await writeSnapshot(file, IDENTITY, table.copy(), undefined, T0, [{ key, fine }]);
  const seen: FineRecord[] = [];
  let records = 0;
  await readSnapshot(
    file,
    IDENTITY,
    () => records++,
    undefined,
    (r) => seen.push(r),
  );
  t.equal(records, 50);
  t.same(seen, [{ key, lapse: fine.s, m: fine.m }], "the overlay as written, unix seconds");

  const plain = path.join(dir, "plain");
  await writeSnapshot(plain, IDENTITY, table.copy(), undefined, T0);
  const old = path.join(dir, "old");
  writeFileSync(old, asFormat3(readFileSync(plain), IDENTITY));
  let oldRecords = 0;
  await readSnapshot(
    old,
    IDENTITY,
    () => oldRecords++,
    undefined,
    () => t.fail("format 3 has no overlays"),
  );
  t.equal(oldRecords, 50, "format 3: every record, no overlay");
});

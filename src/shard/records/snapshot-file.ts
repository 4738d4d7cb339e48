import { createHmac, hkdfSync, randomBytes, timingSafeEqual, type Hmac } from "node:crypto";
import { open, rename, unlink, type FileHandle } from "node:fs/promises";
import { constants as fsc } from "node:fs";
import path from "node:path";
import { forEachRecord, leavingInPlace, maxRecordBytes, recordBytes, recordLengthAt, writeRecord, MAX_KEY_BYTES } from "./state-records.js";
import type { StoredState, TableCopy } from "../table/state-table.js";
import { syncDirectory, writeFully } from "./durable-io.js";
import type { FineLapses } from "../../algorithms/fine-lapses.js";
import { decodeFineRecords, fineRecordBytes, writeFineRecord, MAX_FINE_ENTRIES_PER_KEY, type FineRecord } from "./fine-records.js";

/**
 * A snapshot file: this node's states on disk, written atomically and read back only when
 * whole and authentic: a MAC keyed from the cluster secret, or from the node's own key when
 * it runs alone (snapshotKey; docs/durability.md, docs/security.md).
 *
 *   header (HEADER_FIXED_BYTES + node id + TAG_BYTES):
 *     0  magic "RLSNAPSH"          8  u16 format version   10 u16 header length
 *     12 u32 owned records         16 u32 replica records   20 u32 overlay bytes (format 4; 0 in 3)
 *     24 f64 body length           32 f64 written at (unix ms)
 *     40 16 bytes key id           56 u16 node id length, node id (UTF-8)
 *     then the tag: HMAC-SHA256(header key, header before the tag ‖ HMAC-SHA256(body key, body))
 *   body: the owned states' records, then the replica states' records (state-records.ts),
 *   then (format 4) the fine lapses of owned concurrency states (fine-records.ts, unix seconds),
 *   with the table's absolute times, not the peer channel's ages: the file is read back by
 *   this node, on its own clock, after a downtime an age would not know about. Like the peer
 *   channel's, its states are as they leave the node (Algorithm.leaving): none begins after
 *   the file was written, so a record that does is refused on load like a forged one.
 *
 * Written to a temporary file of a unique name in the same directory (created with
 * O_EXCL|O_NOFOLLOW: a link planted at that name is never followed), every byte checked,
 * fsynced, renamed over `<file>`, and the directory fsynced: a crash or a full disk leaves
 * the old file or the new one, never a mix. Read with O_NOFOLLOW|O_NONBLOCK and fstat: only
 * a regular file no larger than this node's tables could have written is read (a link to
 * /dev/zero, a FIFO or a 1.5 GiB file is refused at once), authenticated in slices before
 * any record is decoded, then decoded in slices; memory stays a slice, whatever the size.
 */
const MAGIC = Buffer.from("RLSNAPSH", "latin1");
/**
 * 2: records carry the state's birth (a reset drops only what was counted before it).
 * 3: a MAC instead of checksums (earlier files are refused: a CRC proves nothing about who wrote them).
 * 4: the fine lapses of concurrency states after the records (a file of 3 still loads, without them;
 *    a build of 3 refuses a file of 4, and starts without it: docs/operations.md).
 */
export const SNAPSHOT_FORMAT_VERSION = 4;
/** The oldest format this build reads. */
const OLDEST_FORMAT_READ = 3;
const HEADER_FIXED_BYTES = 58;
const TAG_BYTES = 32;
const MAX_NODE_ID_BYTES = 1024;
const MAX_HEADER_BYTES = HEADER_FIXED_BYTES + MAX_NODE_ID_BYTES + TAG_BYTES;
/** Encoded per chunk, then written with one await: each chunk is one short event-loop turn (~4 k keys of ~60 bytes, ~2-4 ms). */
const CHUNK_BYTES = 256 * 1024;
/** Authenticated and decoded per turn when reading, for the same reason; also all the memory a read holds. */
const READ_SLICE_BYTES = 1024 * 1024;

/** The keys of this node's snapshots, derived from a root key (the stretched cluster secret, or the node key). */
export interface SnapshotKey {
  body: Buffer;
  header: Buffer;
  /** names the key in the header, so a file of another cluster or node key is told from a forged one */
  id: Buffer;
}

/** HKDF-SHA256 of `root` with this purpose's own label: the snapshot keys are independent of the peer channel's. */
export function snapshotKey(root: Buffer): SnapshotKey {
  const out = Buffer.from(hkdfSync("sha256", root, Buffer.alloc(0), "ringlimit snapshot mac v2", 80));
  return { body: out.subarray(0, 32), header: out.subarray(32, 64), id: out.subarray(64, 80) };
}

export interface SnapshotIdentity {
  key: SnapshotKey;
  nodeId: string;
}

export interface WrittenSnapshot {
  keys: number;
  bytes: number;
  /** the longest synchronous step of the write (the column copy, or one chunk), ms */
  longestStepMs: number;
}

/**
 * The largest snapshot tables of these bounds could write: a record is 38 bytes and its key's
 * UTF-8, which is at most twice what the table counts for the key's string (Latin-1 text:
 * 1 byte in V8, 2 in UTF-8), and at most MAX_KEY_BYTES; the tables count at least 52 bytes
 * per key besides. So neither MAX_KEYS nor MAX_MEMORY_MB can be exceeded by a file within it.
 */
export function maxSnapshotBytes(tables: readonly { maxKeys: number; maxBytes: number }[], fineMaxBytes = 0): number {
  let body = 0;
  for (const t of tables) body += Math.min(t.maxKeys * (recordBytes("") + MAX_KEY_BYTES), 2 * t.maxBytes);
  return MAX_HEADER_BYTES + body + maxFineBytes(fineMaxBytes);
}

/**
 * The largest overlay section a fine store of `maxBytes` could write: it counts 16 bytes an
 * entry (12 on disk) and 160 a key (on disk 4 and the key's UTF-8, at most MAX_KEY_BYTES).
 */
function maxFineBytes(maxBytes: number): number {
  return Math.floor(maxBytes / 16) * 12 + Math.floor(maxBytes / 160) * (4 + MAX_KEY_BYTES);
}

/** Thrown by readSnapshot for a file that must not be loaded; `message` says why. */
export class SnapshotRefused extends Error {
  override name = "SnapshotRefused";
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Write `owned` and `replicas` (point-in-time copies) to `file`, atomically. */
export async function writeSnapshot(
  file: string,
  identity: SnapshotIdentity,
  owned: TableCopy,
  replicas: TableCopy | undefined,
  now: number,
  fine: readonly { key: string; fine: Readonly<FineLapses> }[] = [],
): Promise<WrittenSnapshot> {
  const header = encodeHeader(identity, owned.keys.length, replicas?.keys.length ?? 0, now);
  const tmp = path.join(path.dirname(file), `${path.basename(file)}.${process.pid}-${randomBytes(6).toString("hex")}.tmp`);
  // O_EXCL|O_NOFOLLOW: a file or link already at this name (someone else's) is never written through.
  const fh = await open(tmp, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW, 0o600);
  let longestStepMs = 0;
  let position = header.length;
  const bodyMac = createHmac("sha256", identity.key.body);
  try {
    const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
    for (const copy of replicas === undefined ? [owned] : [owned, replicas]) {
      let i = 0;
      while (i < copy.keys.length) {
        const started = performance.now();
        let o = 0;
        for (; i < copy.keys.length; i++) {
          const key = copy.keys[i]!;
          if (o + maxRecordBytes(key) > CHUNK_BYTES) break;
          o = writeRecord(chunk, o, key, copy.a[i]!, copy.b[i]!, copy.c[i]!, copy.expiry[i]!, copy.origin[i]!, copy.born[i]!);
        }
        // No window start after `now` in the file (a carried one is written as begun now).
        leavingInPlace(chunk, 0, o, now);
        bodyMac.update(chunk.subarray(0, o));
        longestStepMs = Math.max(longestStepMs, performance.now() - started);
        await writeFully(fh, chunk, o, position);
        position += o;
      }
    }
    const statesEnd = position;
    for (let i = 0; i < fine.length;) {
      let o = 0;
      for (; i < fine.length && o + fineRecordBytes(fine[i]!.key, fine[i]!.fine.s.length) <= CHUNK_BYTES; i++) {
        o = writeFineRecord(chunk, o, fine[i]!.key, fine[i]!.fine, undefined);
      }
      bodyMac.update(chunk.subarray(0, o));
      await writeFully(fh, chunk, o, position);
      position += o;
    }
    header.writeUInt32LE(position - statesEnd, 20);
    header.writeDoubleLE(position - header.length, 24);
    tag(identity.key, header, bodyMac).copy(header, header.length - TAG_BYTES);
    await writeFully(fh, header, header.length, 0);
    await fh.sync();
    await fh.close();
  } catch (err) {
    await fh.close().catch(() => undefined);
    await unlinkQuietly(tmp);
    throw err;
  }
  try {
    await rename(tmp, file);
  } catch (err) {
    await unlinkQuietly(tmp);
    throw err;
  }
  await syncDirectory(path.dirname(file));
  return { keys: owned.keys.length + (replicas?.keys.length ?? 0), bytes: position, longestStepMs };
}

async function unlinkQuietly(file: string): Promise<void> {
  await unlink(file).catch(() => undefined);
}

function tag(key: SnapshotKey, header: Buffer, bodyMac: Hmac): Buffer {
  return createHmac("sha256", key.header)
    .update(header.subarray(0, header.length - TAG_BYTES))
    .update(bodyMac.digest())
    .digest();
}

export interface SnapshotContents {
  nodeId: string;
  writtenAt: number;
  owned: number;
  replicas: number;
  bytes: number;
}

/**
 * Read `file` and hand each record to `visit` (replica: whether it was a replica state).
 * Returns undefined when there is no file. Throws SnapshotRefused, before any record is
 * visited, for a file that is not a regular file, larger than `maxBytes`, truncated, not
 * authentic (its MAC), of another format version or written with another key.
 */
export async function readSnapshot(
  file: string,
  identity: SnapshotIdentity,
  visit: (key: string, state: StoredState, replica: boolean) => void,
  maxBytes = Number.MAX_SAFE_INTEGER,
  visitFine: (record: FineRecord) => void = () => undefined,
): Promise<SnapshotContents | undefined> {
  let fh: FileHandle;
  try {
    // O_NOFOLLOW: a symbolic link is refused, not followed (to /dev/zero, to another file);
    // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer.
    fh = await open(file, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    if (code === "ELOOP") throw new SnapshotRefused("not a regular file: a symbolic link");
    throw new SnapshotRefused(`cannot open: ${code ?? (err as Error).message}`);
  }
  try {
    const stat = await fh.stat();
    if (!stat.isFile()) throw new SnapshotRefused(`not a regular file: ${kindOf(stat)}`);
    if (stat.size > maxBytes) {
      throw new SnapshotRefused(`too large: ${stat.size} bytes, more than the ${maxBytes} this node's MAX_KEYS and MAX_MEMORY_MB could have written`);
    }
    const size = stat.size;
    const head = Buffer.alloc(Math.min(size, MAX_HEADER_BYTES));
    await readFully(fh, head, head.length, 0);
    const h = decodeHeader(head, identity);
    if (h.headerLength + h.bodyLength !== size) {
      throw new SnapshotRefused(`truncated: the file is ${size} bytes, its header says ${h.headerLength + h.bodyLength}`);
    }
    const slice = Buffer.allocUnsafe(READ_SLICE_BYTES);
    // First pass: authenticate the whole file before any record is believed.
    const bodyMac = createHmac("sha256", identity.key.body);
    for (let o = 0; o < h.bodyLength; o += READ_SLICE_BYTES) {
      const n = Math.min(READ_SLICE_BYTES, h.bodyLength - o);
      await readFully(fh, slice, n, h.headerLength + o);
      bodyMac.update(slice.subarray(0, n));
      await turn();
    }
    const expected = tag(identity.key, head.subarray(0, h.headerLength), bodyMac);
    if (!timingSafeEqual(expected, head.subarray(h.headerLength - TAG_BYTES, h.headerLength))) {
      throw new SnapshotRefused("not authentic: the MAC does not match (the file was altered, or written with another key)");
    }
    // Second pass: decode, a slice of whole records per turn; a record cut by the slice's end is read again with the next.
    const total = h.owned + h.replicas;
    const statesLength = h.bodyLength - h.fineLength;
    let seen = 0;
    let o = 0;
    while (o < statesLength) {
      const n = Math.min(READ_SLICE_BYTES, statesLength - o);
      await readFully(fh, slice, n, h.headerLength + o);
      let end = 0;
      while (end + 2 <= n && end + recordLengthAt(slice, end) <= n) end += recordLengthAt(slice, end);
      if (end === 0) throw new SnapshotRefused(`corrupt: a record longer than a slice after ${seen} records`);
      if (n < READ_SLICE_BYTES && end !== n) throw new SnapshotRefused(`corrupt: a truncated record after ${seen} records`);
      try {
        forEachRecord(slice, 0, end, (key, state) => visit(key, state, seen++ >= h.owned));
      } catch (err) {
        // Only a writer bug gets here: the MAC matched what was written.
        throw new SnapshotRefused(`corrupt: ${(err as Error).message} after ${seen} records`);
      }
      o += end;
      await turn();
    }
    if (seen !== total) throw new SnapshotRefused(`corrupt: ${seen} records, header says ${total}`);
    await readFine(fh, slice, h.headerLength + statesLength, h.fineLength, visitFine);
    return { nodeId: h.nodeId, writtenAt: h.writtenAt, owned: h.owned, replicas: h.replicas, bytes: size };
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** The overlay section (format 4), whole records a slice at a time, like the states'. */
async function readFine(fh: FileHandle, slice: Buffer, start: number, length: number, visit: (record: FineRecord) => void): Promise<void> {
  let o = 0;
  while (o < length) {
    const n = Math.min(READ_SLICE_BYTES, length - o);
    await readFully(fh, slice, n, start + o);
    let end = 0;
    for (;;) {
      if (end + 2 > n) break;
      const k = slice.readUInt16BE(end);
      if (k > MAX_KEY_BYTES || end + 2 + k + 2 > n) break;
      const entries = slice.readUInt16BE(end + 2 + k);
      if (entries > MAX_FINE_ENTRIES_PER_KEY) throw new SnapshotRefused("corrupt: an overlay record out of bounds");
      const len = 2 + k + 2 + entries * 12;
      if (end + len > n) break;
      end += len;
    }
    if (end === 0 || (n < READ_SLICE_BYTES && end !== n)) throw new SnapshotRefused("corrupt: a truncated overlay record");
    try {
      for (const r of decodeFineRecords(slice, 0, end)) visit(r);
    } catch (err) {
      throw new SnapshotRefused(`corrupt: ${(err as Error).message}`);
    }
    o += end;
    await turn();
  }
}

function kindOf(stat: { isDirectory(): boolean; isFIFO(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean; isSocket(): boolean }): string {
  if (stat.isDirectory()) return "a directory";
  if (stat.isFIFO()) return "a FIFO";
  if (stat.isCharacterDevice()) return "a character device";
  if (stat.isBlockDevice()) return "a block device";
  if (stat.isSocket()) return "a socket";
  return "not a file";
}

/** Read exactly `length` bytes at `position`; a file that ends before is truncated. */
async function readFully(fh: FileHandle, buf: Buffer, length: number, position: number): Promise<void> {
  let done = 0;
  while (done < length) {
    const { bytesRead } = await fh.read(buf, done, length - done, position + done);
    if (bytesRead === 0) throw new SnapshotRefused("truncated: the file ended early");
    done += bytesRead;
  }
}

function encodeHeader(identity: SnapshotIdentity, owned: number, replicas: number, now: number): Buffer {
  const node = Buffer.from(identity.nodeId, "utf8").subarray(0, MAX_NODE_ID_BYTES);
  const header = Buffer.alloc(HEADER_FIXED_BYTES + node.length + TAG_BYTES);
  MAGIC.copy(header, 0);
  header.writeUInt16LE(SNAPSHOT_FORMAT_VERSION, 8);
  header.writeUInt16LE(header.length, 10);
  header.writeUInt32LE(owned, 12);
  header.writeUInt32LE(replicas, 16);
  header.writeDoubleLE(now, 32);
  identity.key.id.copy(header, 40, 0, 16);
  header.writeUInt16LE(node.length, 56);
  node.copy(header, HEADER_FIXED_BYTES);
  return header;
}

interface Header {
  headerLength: number;
  /** bytes of the overlay section at the body's end */
  fineLength: number;
  owned: number;
  replicas: number;
  bodyLength: number;
  writtenAt: number;
  nodeId: string;
}

/** The header's fields, checked for shape only: nothing of it is believed before the MAC matches, except what bounds the reading. */
function decodeHeader(data: Buffer, identity: SnapshotIdentity): Header {
  if (data.length < HEADER_FIXED_BYTES + TAG_BYTES || !data.subarray(0, 8).equals(MAGIC)) throw new SnapshotRefused("not a ringlimit snapshot (bad magic)");
  const version = data.readUInt16LE(8);
  if (version < OLDEST_FORMAT_READ || version > SNAPSHOT_FORMAT_VERSION) {
    throw new SnapshotRefused(`format version ${version}; this build reads versions ${OLDEST_FORMAT_READ} to ${SNAPSHOT_FORMAT_VERSION}`);
  }
  const headerLength = data.readUInt16LE(10);
  const nodeLength = data.readUInt16LE(56);
  if (nodeLength > MAX_NODE_ID_BYTES || headerLength !== HEADER_FIXED_BYTES + nodeLength + TAG_BYTES || headerLength > data.length) {
    throw new SnapshotRefused("corrupt: bad header length");
  }
  if (!data.subarray(40, 56).equals(identity.key.id)) {
    throw new SnapshotRefused("foreign: written with another key (another CLUSTER_SECRET, or another node key)");
  }
  const bodyLength = data.readDoubleLE(24);
  if (!Number.isSafeInteger(bodyLength) || bodyLength < 0) throw new SnapshotRefused("corrupt: bad body length");
  // Format 3 wrote zero there: no overlays.
  const fineLength = version >= 4 ? data.readUInt32LE(20) : 0;
  if (fineLength > bodyLength) throw new SnapshotRefused("corrupt: bad overlay length");
  return {
    fineLength,
    headerLength,
    owned: data.readUInt32LE(12),
    replicas: data.readUInt32LE(16),
    bodyLength,
    writtenAt: data.readDoubleLE(32),
    nodeId: data.toString("utf8", HEADER_FIXED_BYTES, HEADER_FIXED_BYTES + nodeLength),
  };
}

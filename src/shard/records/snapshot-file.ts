import { createHmac } from "node:crypto";
import { open, readFile, rename, unlink } from "node:fs/promises";
import path from "node:path";
import { crc32 } from "node:zlib";
import { forEachRecord, maxRecordBytes, recordLengthAt, writeRecord } from "./state-records.js";
import type { StoredState, TableCopy } from "../table/state-table.js";

/**
 * A snapshot file: this node's states on disk, written atomically and read back only when
 * whole, checksummed and written by the same cluster.
 *
 *   header (HEADER_FIXED_BYTES + node id + 4):
 *     0  magic "RLSNAPSH"          8  u16 format version   10 u16 header length
 *     12 u32 owned records         16 u32 replica records   20 u32 body crc32
 *     24 f64 body length           32 f64 written at (unix ms)
 *     40 16 bytes cluster identity 56 u16 node id length, node id (UTF-8), u32 header crc32
 *   body: the owned states' records, then the replica states' records (state-records.ts),
 *   with the table's absolute times, not the peer channel's ages: the file is read back by
 *   this node, on its own clock, after a downtime an age would not know about.
 *
 * Written to `<file>.tmp`, fsynced, renamed over `<file>`, and the directory fsynced: a
 * crash leaves either the old file or the new one, never a mix.
 */
const MAGIC = Buffer.from("RLSNAPSH", "latin1");
/** 2: records carry the state's birth (a reset drops only what was counted before it). */
export const SNAPSHOT_FORMAT_VERSION = 2;
const HEADER_FIXED_BYTES = 58;
/** Encoded per chunk, then written with one await: each chunk is one short event-loop turn (~4 k keys of ~60 bytes, ~2-4 ms). */
const CHUNK_BYTES = 256 * 1024;
/** Checksummed and decoded per turn when reading, for the same reason. */
const READ_SLICE_BYTES = 1024 * 1024;

export interface SnapshotIdentity {
  /** 16 bytes derived from the cluster secret (zeros for a node without one): a file of another cluster is foreign */
  cluster: Buffer;
  nodeId: string;
}

export interface WrittenSnapshot {
  keys: number;
  bytes: number;
  /** the longest synchronous step of the write (the column copy, or one chunk), ms */
  longestStepMs: number;
}

/** The 16 bytes that tell this cluster's snapshots from another's, derived from CLUSTER_SECRET without revealing it (zeros alone). */
export function clusterIdentity(clusterSecret: string | undefined): Buffer {
  if (clusterSecret === undefined) return Buffer.alloc(16);
  return createHmac("sha256", clusterSecret).update("ringlimit snapshot identity v1").digest().subarray(0, 16);
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
): Promise<WrittenSnapshot> {
  const header = encodeHeader(identity, owned.keys.length, replicas?.keys.length ?? 0, now);
  const tmp = file + ".tmp";
  const fh = await open(tmp, "w", 0o600);
  let longestStepMs = 0;
  let position = header.length;
  let crc = 0;
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
        crc = crc32(chunk.subarray(0, o), crc);
        longestStepMs = Math.max(longestStepMs, performance.now() - started);
        await fh.write(chunk, 0, o, position);
        position += o;
      }
    }
    const bodyLength = position - header.length;
    header.writeUInt32LE(crc >>> 0, 20);
    header.writeDoubleLE(bodyLength, 24);
    header.writeUInt32LE(crc32(header.subarray(0, header.length - 4)) >>> 0, header.length - 4);
    await fh.write(header, 0, header.length, 0);
    await fh.sync();
  } catch (err) {
    await fh.close().catch(() => undefined);
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  await fh.close();
  await rename(tmp, file);
  await syncDirectory(path.dirname(file));
  return { keys: owned.keys.length + (replicas?.keys.length ?? 0), bytes: position, longestStepMs };
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
 * visited, for a file that is truncated, corrupt (header or body checksum), of another
 * format version or of another cluster. Checksum and decoding run a slice per event-loop turn.
 */
export async function readSnapshot(
  file: string,
  identity: SnapshotIdentity,
  visit: (key: string, state: StoredState, replica: boolean) => void,
): Promise<SnapshotContents | undefined> {
  let data: Buffer;
  try {
    data = await readFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new SnapshotRefused(`cannot read: ${(err as Error).message}`);
  }
  const h = decodeHeader(data, identity);
  const body = data.subarray(h.headerLength);
  if (body.length !== h.bodyLength) throw new SnapshotRefused(`truncated: body is ${body.length} bytes, header says ${h.bodyLength}`);
  let crc = 0;
  for (let o = 0; o < body.length; o += READ_SLICE_BYTES) {
    crc = crc32(body.subarray(o, o + READ_SLICE_BYTES), crc);
    await turn();
  }
  if (crc >>> 0 !== h.bodyCrc) throw new SnapshotRefused("corrupt: body checksum does not match");
  // Records are decoded a slice of records per turn: find record boundaries as we go.
  let o = 0;
  let seen = 0;
  const total = h.owned + h.replicas;
  while (o < body.length) {
    const sliceEnd = Math.min(body.length, o + READ_SLICE_BYTES);
    // Decode whole records up to the first one that ends past sliceEnd.
    let end = o;
    while (end < sliceEnd && end + 2 <= body.length) end += recordLengthAt(body, end);
    try {
      forEachRecord(body, o, Math.min(end, body.length), (key, state) => visit(key, state, seen++ >= h.owned));
    } catch (err) {
      // Only a writer bug gets here: the checksum matched what was written.
      throw new SnapshotRefused(`corrupt: ${(err as Error).message} after ${seen} records`);
    }
    o = end;
    await turn();
  }
  if (seen !== total) throw new SnapshotRefused(`corrupt: ${seen} records, header says ${total}`);
  return { nodeId: h.nodeId, writtenAt: h.writtenAt, owned: h.owned, replicas: h.replicas, bytes: data.length };
}

function encodeHeader(identity: SnapshotIdentity, owned: number, replicas: number, now: number): Buffer {
  const node = Buffer.from(identity.nodeId, "utf8").subarray(0, 1024);
  const header = Buffer.alloc(HEADER_FIXED_BYTES + node.length + 4);
  MAGIC.copy(header, 0);
  header.writeUInt16LE(SNAPSHOT_FORMAT_VERSION, 8);
  header.writeUInt16LE(header.length, 10);
  header.writeUInt32LE(owned, 12);
  header.writeUInt32LE(replicas, 16);
  header.writeDoubleLE(now, 32);
  identity.cluster.copy(header, 40, 0, 16);
  header.writeUInt16LE(node.length, 56);
  node.copy(header, HEADER_FIXED_BYTES);
  return header;
}

interface Header {
  headerLength: number;
  owned: number;
  replicas: number;
  bodyCrc: number;
  bodyLength: number;
  writtenAt: number;
  nodeId: string;
}

function decodeHeader(data: Buffer, identity: SnapshotIdentity): Header {
  if (data.length < HEADER_FIXED_BYTES + 4 || !data.subarray(0, 8).equals(MAGIC)) throw new SnapshotRefused("not a ringlimit snapshot (bad magic)");
  const version = data.readUInt16LE(8);
  if (version !== SNAPSHOT_FORMAT_VERSION) throw new SnapshotRefused(`format version ${version}; this build reads version ${SNAPSHOT_FORMAT_VERSION}`);
  const headerLength = data.readUInt16LE(10);
  const nodeLength = data.readUInt16LE(56);
  if (headerLength !== HEADER_FIXED_BYTES + nodeLength + 4 || headerLength > data.length) throw new SnapshotRefused("corrupt: bad header length");
  if (crc32(data.subarray(0, headerLength - 4)) >>> 0 !== data.readUInt32LE(headerLength - 4))
    throw new SnapshotRefused("corrupt: header checksum does not match");
  if (!data.subarray(40, 56).equals(identity.cluster.subarray(0, 16))) {
    throw new SnapshotRefused("foreign: written by a node of another cluster (CLUSTER_SECRET differs)");
  }
  return {
    headerLength,
    owned: data.readUInt32LE(12),
    replicas: data.readUInt32LE(16),
    bodyCrc: data.readUInt32LE(20),
    bodyLength: data.readDoubleLE(24),
    writtenAt: data.readDoubleLE(32),
    nodeId: data.toString("utf8", HEADER_FIXED_BYTES, HEADER_FIXED_BYTES + nodeLength),
  };
}

async function syncDirectory(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

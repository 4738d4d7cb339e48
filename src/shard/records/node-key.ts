import { randomBytes } from "node:crypto";
import { constants as fsc } from "node:fs";
import { open, rename } from "node:fs/promises";
import path from "node:path";
import { writeFileDurably } from "./durable-io.js";

/** The key a node without CLUSTER_SECRET signs its snapshots with, kept in STATE_DIR. */
export const NODE_KEY_FILE = "ringlimit.node-key";
const NODE_KEY_BYTES = 32;

export interface NodeKey {
  key: Buffer;
  /** set when a key file was there but could not be trusted (moved aside; a new key was made): why */
  replaced?: string;
  created: boolean;
}

/**
 * The node key: 32 random bytes in STATE_DIR/ringlimit.node-key, made on first start. It is
 * trusted only as a regular file (never through a link) of 32 bytes, owned by this process's
 * user and readable by it alone (mode 0600): a key that others could read or replace would let
 * them sign snapshots. Anything else is moved aside (`.refused`) and a new key made, so the
 * snapshot signed with the old one is refused as foreign. It guards against those who can
 * write STATE_DIR but are not this node's user (docs/security.md); this node's own user can
 * do anything the node can.
 */
export async function loadNodeKey(dir: string): Promise<NodeKey> {
  const file = path.join(dir, NODE_KEY_FILE);
  let replaced: string | undefined;
  try {
    const fh = await open(file, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
    try {
      const stat = await fh.stat();
      const euid = process.geteuid?.() ?? stat.uid;
      if (!stat.isFile()) replaced = "not a regular file";
      else if (stat.size !== NODE_KEY_BYTES) replaced = `${stat.size} bytes, not ${NODE_KEY_BYTES}`;
      else if (stat.uid !== euid) replaced = `owned by uid ${stat.uid}, not this node's ${euid}`;
      else if ((stat.mode & 0o077) !== 0) replaced = `mode ${(stat.mode & 0o777).toString(8)}: others may read or write it (0600 needed)`;
      else {
        const key = Buffer.alloc(NODE_KEY_BYTES);
        const { bytesRead } = await fh.read(key, 0, NODE_KEY_BYTES, 0);
        if (bytesRead === NODE_KEY_BYTES) return { key, created: false };
        replaced = "could not be read whole";
      }
    } finally {
      await fh.close();
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ELOOP") replaced = "a symbolic link";
    else if (code !== "ENOENT") throw err;
  }
  if (replaced !== undefined) await rename(file, file + ".refused");
  const key = randomBytes(NODE_KEY_BYTES);
  await writeFileDurably(file, key);
  return { key, created: true, ...(replaced !== undefined ? { replaced } : {}) };
}

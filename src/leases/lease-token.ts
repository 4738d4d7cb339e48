import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto";

/*
 * A concurrency lease as callers hold it (docs/api.md, Concurrency): opaque to them, 39
 * base64url characters of
 *   u8 version (1) ‖ u32 lapse (unix seconds, the granting owner's clock) ‖ 8 random bytes ‖
 *   16 bytes HMAC-SHA256(lease key, version ‖ lapse ‖ random ‖ u32 duration ‖ u32 namespace length ‖
 *   namespace ‖ identifier) truncated.
 * The MAC binds the lease to its key (namespace, identifier) and lifetime, so a lease of one
 * key cannot free a slot of another, and nobody without the lease key can make one. The lease
 * key is derived from the cluster key (CLUSTER_SECRET), which every member holds: any member
 * verifies a lease, whichever granted it, and so does an owner after a hand-off or promotion.
 * A node without CLUSTER_SECRET draws a key per process: its leases end with it.
 */

const VERSION = 1;
const RANDOM_BYTES = 8;
const MAC_BYTES = 16;
const TOKEN_BYTES = 1 + 4 + RANDOM_BYTES + MAC_BYTES;
/** Longest lease a request may carry (docs/api.md); ours are 39 characters. */
export const MAX_LEASE_CHARS = 128;
const TOKEN_CHARS = Math.ceil((TOKEN_BYTES * 4) / 3);
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** A lease read back and verified: its lapse and identity. */
export interface OpenedLease {
  /** unix seconds, on the clock of the owner that granted it */
  lapseS: number;
  /** its MAC, base64url: unique per lease, what an owner remembers a release by */
  id: string;
}

export class LeaseTokens {
  private readonly key: Buffer;

  /** `root`: clusterKey(CLUSTER_SECRET), or undefined for a per-process key. */
  constructor(root: Buffer | undefined) {
    this.key = root === undefined ? randomBytes(32) : Buffer.from(hkdfSync("sha256", root, Buffer.alloc(0), "ringlimit concurrency lease v1", 32));
  }

  /** A new lease of the slot lapsing at unix second `lapseS` of the key (namespace, identifier) with lifetime `duration` (seconds). */
  mint(namespace: string, identifier: string, duration: number, lapseS: number): string {
    const token = Buffer.allocUnsafe(TOKEN_BYTES);
    token.writeUInt8(VERSION, 0);
    token.writeUInt32BE(lapseS >>> 0, 1);
    randomBytes(RANDOM_BYTES).copy(token, 5);
    this.mac(token, namespace, identifier, duration).copy(token, 5 + RANDOM_BYTES);
    return token.toString("base64url");
  }

  /** The lease when it is one of ours for this key and lifetime; undefined for anything else (never says why: a forger learns nothing). */
  open(lease: string, namespace: string, identifier: string, duration: number): OpenedLease | undefined {
    if (lease.length !== TOKEN_CHARS || !BASE64URL.test(lease)) return undefined;
    const token = Buffer.from(lease, "base64url");
    if (token.length !== TOKEN_BYTES || token.readUInt8(0) !== VERSION) return undefined;
    const sent = token.subarray(5 + RANDOM_BYTES);
    // Compared in constant time: the time taken says nothing of how much of a guess was right.
    if (!timingSafeEqual(sent, this.mac(token, namespace, identifier, duration))) return undefined;
    return { lapseS: token.readUInt32BE(1), id: sent.toString("base64url") };
  }

  private mac(token: Buffer, namespace: string, identifier: string, duration: number): Buffer {
    // The namespace's length first, as in a ring key: ("ab", "c") and ("a", "bc") sign differently.
    const fixed = Buffer.allocUnsafe(8);
    fixed.writeUInt32BE(duration >>> 0, 0);
    fixed.writeUInt32BE(namespace.length, 4);
    return createHmac("sha256", this.key)
      .update(token.subarray(0, 5 + RANDOM_BYTES))
      .update(fixed)
      .update(namespace, "utf8")
      .update(identifier, "utf8")
      .digest()
      .subarray(0, MAC_BYTES);
  }
}

let processTokens: LeaseTokens | undefined;

/** This process's lease tokens for a node without CLUSTER_SECRET (and tests): one key, made on first use. */
export function processLeaseTokens(): LeaseTokens {
  return (processTokens ??= new LeaseTokens(undefined));
}

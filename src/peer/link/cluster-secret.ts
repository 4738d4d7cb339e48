import { randomBytes, scryptSync } from "node:crypto";

// The cluster secret: how a new one is made and which values are refused (CLUSTER_SECRET).

/**
 * Values shown as examples in this repository's docs, manifests and earlier releases: known
 * to everyone, so refused even though some are long enough.
 */
export const EXAMPLE_CLUSTER_SECRETS: readonly string[] = Object.freeze([
  "replace-with-at-least-32-random-characters",
  "test-cluster-secret-0123456789",
  "bench-drain-secret-0123456789",
  "bench-forwarding-secret-0123",
  "change-me",
]);

/** 32 random bytes, base64url (43 characters): what `npm run keygen` prints. */
export function generateClusterSecret(): string {
  return randomBytes(32).toString("base64url");
}

/**
 * The CLUSTER_SECRET rule (docs/operations.md): at least 32 random bytes' worth, that is 64
 * hex characters, or 43 characters of anything else (base64/base64url of 32 bytes). The
 * value itself cannot prove it is random, so what is clearly not is refused: fewer than
 * 128 bits by its own character frequencies, a repeated shorter string, mostly runs and
 * sequences (aaaa, abcd, 1234), and our published examples. Thresholds leave a wide margin
 * for real random values: over 200 000 random 32-byte secrets each, the lowest frequency
 * entropy was 216 bits (hex) and 180 bits (base64url), and at most 41 % of neighbouring
 * characters were equal or consecutive.
 * Returns what is wrong, without echoing the secret, or undefined when it is acceptable.
 */
export function clusterSecretWeakness(secret: string): string | undefined {
  if (EXAMPLE_CLUSTER_SECRETS.includes(secret)) return "is an example value from the docs; generate your own";
  const hex = /^[0-9a-fA-F]+$/.test(secret);
  if (hex && secret.length < 64) return `a hex secret needs at least 64 characters (32 bytes), got ${secret.length}`;
  if (secret.length < 43) return `needs at least 43 characters (32 random bytes as base64url) or 64 hex characters, got ${secret.length}`;
  const counts = new Map<string, number>();
  for (const c of secret) counts.set(c, (counts.get(c) ?? 0) + 1);
  let bits = 0;
  for (const n of counts.values()) bits -= n * Math.log2(n / secret.length);
  if (bits < 128) return `too little variety (${Math.floor(bits)} bits by character frequency, 128 needed)`;
  for (let period = 1; period <= secret.length / 2; period++) {
    if (secret.slice(period) === secret.slice(0, -period)) return "is a repeated shorter string";
  }
  let steps = 0;
  for (let i = 1; i < secret.length; i++) if (Math.abs(secret.charCodeAt(i) - secret.charCodeAt(i - 1)) <= 1) steps++;
  if (steps > 0.6 * (secret.length - 1)) return "is mostly runs or sequences of characters";
  return undefined;
}

/**
 * scrypt's cost for the cluster key (RFC 7914): N = 2^14, r = 8, p = 1, 16 MiB of memory per
 * derivation. Measured on this project's 2-core machine shared with busy neighbours
 * (bench/secret-guess.mjs): 2^14 took 0.1 s at load ~10 and 0.3-0.4 s at load ~19, once at
 * start-up; 2^15 took 0.3 s and 1.2 s, over the second a start-up may cost on such a host.
 * Every offline guess of the secret pays the same (the key feeds both the peer handshake
 * and the snapshot MAC), against ~0.1-0.5 ms per guess for HKDF alone.
 */
export const CLUSTER_KEY_SCRYPT = Object.freeze({ N: 2 ** 14, r: 8, p: 1, maxmem: 64 * 1024 * 1024 });
const CLUSTER_KEY_SALT = "ringlimit cluster key v1";
const stretched = new Map<string, Buffer>();

/**
 * The cluster key: CLUSTER_SECRET stretched by scrypt (CLUSTER_KEY_SCRYPT), the root every
 * other key is derived from with HKDF and a label of its own (the peer handshake, the
 * snapshot MAC). Derived once per secret in a process: a node's server, its clients and
 * its snapshotter share one derivation (and a test suite's many pairs share theirs).
 */
export function clusterKey(secret: string): Buffer {
  let key = stretched.get(secret);
  if (key === undefined) {
    key = scryptSync(Buffer.from(secret, "utf8"), CLUSTER_KEY_SALT, 32, CLUSTER_KEY_SCRYPT);
    stretched.set(secret, key);
  }
  return key;
}

import { createHash, hash as oneShotHash, randomBytes, timingSafeEqual } from "node:crypto";

const KEY_PREFIX = "svc_sk_";

/** Bound on remembered valid tokens; there are only as many as configured keys in use. */
const VERIFIED_CACHE_LIMIT = 1024;

/**
 * What a key may do. `prefixes` null: any namespace (a key configured without `@`).
 * Otherwise the effective namespace (namespace, plus "." and the product slug when a
 * product is sent) must start with one of them: `API_KEYS=svc_sk_…@checkout.,search.`.
 */
export class KeyScope {
  static readonly ANY = new KeyScope(null);

  constructor(readonly prefixes: readonly string[] | null) {}

  admits(namespace: string): boolean {
    const prefixes = this.prefixes;
    if (prefixes === null) return true;
    for (let i = 0; i < prefixes.length; i++) if (namespace.startsWith(prefixes[i]!)) return true;
    return false;
  }
}

/**
 * A configured key entry: `<key>` or `<key>@<prefix>,<prefix>…` (API_KEYS), and the same
 * with the key's SHA-256 in hex (API_KEY_HASHES). Keys never contain `@`, so the first one
 * ends the key; config.ts has already regrouped the comma-separated prefixes into the entry.
 */
export function splitScope(entry: string): { key: string; scope: KeyScope } {
  const at = entry.indexOf("@");
  if (at < 0) return { key: entry, scope: KeyScope.ANY };
  return { key: entry.slice(0, at), scope: new KeyScope(entry.slice(at + 1).split(",")) };
}

/**
 * Checks bearer tokens against configured keys without leaking, through timing, how much
 * of a key an attacker got right. A token is hashed (SHA-256) and the digest compared with
 * every configured digest by timingSafeEqual, without early exit. Plaintext keys are
 * hashed at start-up and not kept.
 *
 * That costs ~4.8 µs per request under load (CPU profile, wrk, 50 connections: 14% of the
 * service's CPU), so a header value that verified is remembered in a Map keyed by the
 * value itself, with its key's scope. A lookup there compares a wrong token's (per-process
 * randomly seeded) string hash with the valid ones' and stops; characters are only compared
 * after a full hash collision, which an attacker cannot aim for. Wrong tokens are never
 * remembered, so they always take the hashing path and cannot grow the cache.
 */
export class ApiKeyVerifier {
  private readonly digests: Buffer[];
  private readonly scopes: KeyScope[];
  private readonly verified = new Map<string, KeyScope>();

  /** Entries as configured: a key (or a hex SHA-256), optionally followed by `@prefix,prefix…`. */
  constructor(plaintextKeys: readonly string[], hexDigests: readonly string[]) {
    const plain = plaintextKeys.map(splitScope);
    const hashed = hexDigests.map(splitScope);
    // A digest that is not 32 bytes would make timingSafeEqual throw on every request.
    if (hashed.some(({ key }) => !/^[0-9a-fA-F]{64}$/.test(key))) throw new RangeError("every key hash must be 64 hex characters (SHA-256)");
    this.digests = [...plain.map(({ key }) => sha256(key)), ...hashed.map(({ key }) => Buffer.from(key, "hex"))];
    this.scopes = [...plain, ...hashed].map(({ scope }) => scope);
  }

  get size(): number {
    return this.digests.length;
  }

  /** `header` is the raw Authorization header value ("" when absent). */
  verifyHeader(header: string): boolean {
    return this.scopeOf(header) !== undefined;
  }

  /** The scope of the key in `header`, or undefined when it is not a configured key. */
  scopeOf(header: string): KeyScope | undefined {
    // The whole header value is the cache key: parsing the scheme and slicing the token
    // cost ~1 µs per request under load (ablation in the hot-path profile).
    const cached = this.verified.get(header);
    if (cached !== undefined) return cached;
    const token = bearerToken(header);
    if (token === undefined) return undefined;
    const digest = oneShotHash("sha256", token, "buffer");
    // Every digest is compared, whichever matches; a key configured more than once gets
    // the union of its scopes (unscoped if any entry is).
    let prefixes: string[] | null | undefined = undefined;
    for (let i = 0; i < this.digests.length; i++) {
      if (!timingSafeEqual(digest, this.digests[i]!)) continue;
      const scope = this.scopes[i]!.prefixes;
      prefixes = prefixes === null || scope === null ? null : [...(prefixes ?? []), ...scope];
    }
    if (prefixes === undefined) return undefined;
    const scope = prefixes === null ? KeyScope.ANY : new KeyScope(prefixes);
    if (this.verified.size >= VERIFIED_CACHE_LIMIT) this.verified.clear();
    this.verified.set(header, scope);
    return scope;
  }
}

/**
 * One shared bearer secret (METRICS_TOKEN). Both sides are hashed to 32 bytes first, so
 * timingSafeEqual compares equal lengths and the time taken says nothing about the secret,
 * not even its length.
 */
export class BearerSecret {
  private readonly digest: Buffer;

  constructor(secret: string) {
    this.digest = sha256(secret);
  }

  matches(header: string): boolean {
    const token = bearerToken(header);
    return timingSafeEqual(sha256(token ?? ""), this.digest) && token !== undefined;
  }
}

/** The token of `Bearer <token>`; the scheme is matched case-insensitively (RFC 9110). */
export function bearerToken(header: string): string | undefined {
  if (header.length < 8) return undefined;
  const scheme = header.slice(0, 6);
  if (scheme !== "Bearer" && scheme.toLowerCase() !== "bearer") return undefined;
  let i = 6;
  if (header.charCodeAt(i) !== 32) return undefined;
  while (header.charCodeAt(i) === 32) i++;
  const token = header.slice(i);
  if (token.length === 0 || token.includes(" ")) return undefined;
  return token;
}

export function sha256(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

export function generateApiKey(): { key: string; sha256: string } {
  // 32 random bytes as base64url: 43 characters, 256 bits.
  const key = KEY_PREFIX + randomBytes(32).toString("base64url");
  return { key, sha256: sha256(key).toString("hex") };
}

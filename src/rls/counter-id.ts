import { createHash } from "node:crypto";
import { REQUEST_BOUNDS } from "../decision.js";
import type { RlsDescriptorEntries } from "../policy/types.js";

const PREFIX = "sha256:";

/**
 * The identifier a descriptor's count is stored under (docs/envoy.md, Counting): the
 * policy's counter key, as is when it fits the identifier bound of POST /limit, else
 * `sha256:` and the key's SHA-256 in base64url. A long key stays one exact counter (no
 * collision to fear) and the state table, peer frames and snapshots keep their bounds.
 * A key that starts with `sha256:` is hashed too, so no short key can pose as a long one's digest.
 */
export function counterIdentifier(counterKey: string): string {
  if (counterKey.length <= REQUEST_BOUNDS.identifier.max && !counterKey.startsWith(PREFIX)) return counterKey;
  return PREFIX + createHash("sha256").update(counterKey).digest("base64url");
}

/**
 * The counter key of a descriptor that carries its own `limit`: one counter per distinct
 * descriptor, as envoyproxy/ratelimit keys an override, whatever rule it matches. Each key
 * and value is preceded by its length, so no two descriptors share a key by accident
 * (`a_b`=`c` and `a`=`b_c` do in a `key_value` join).
 */
export function entriesKey(entries: RlsDescriptorEntries): string {
  let key = "limit";
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    key += "|" + e.key.length + ":" + e.key + "=" + e.value.length + ":" + e.value;
  }
  return key;
}

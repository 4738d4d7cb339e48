import type { MetadataValue } from "../policy/types.js";
import { OVERRIDE_UNIT_NAMES } from "./wire/json.js";
import { overrideUnitNumber, type RlsRequest } from "./wire/messages.js";

type Struct = { [key: string]: MetadataValue };

/**
 * RESPONSE_DYNAMIC_METADATA: the answer's dynamic_metadata as envoyproxy/ratelimit builds it,
 * for Envoy to put in the filter metadata of `envoy.filters.http.ratelimit`: the request's
 * `domain`, its `descriptors` (each `entries` as "key=value", its `limit` override and its
 * own `hitsAddend` when set), the request's `hitsAddend` when not 0, and `metadata`: the
 * rule metadata of every descriptor that passed, merged (the first value of a key wins;
 * maps under one key are merged key by key).
 */
export function dynamicMetadata(request: RlsRequest, passed: readonly (Struct | undefined)[]): Struct {
  const out: Struct = { domain: request.domain! };
  out.descriptors = request.descriptors!.map((d) => {
    const one: Struct = { entries: d.entries!.map((e) => `${e.key}=${e.value ?? ""}`) };
    if (d.limit !== undefined && d.limit !== null)
      one.limit = `requests_per_unit:${d.limit.requests_per_unit ?? 0} unit:${OVERRIDE_UNIT_NAMES[overrideUnitNumber(d.limit.unit) ?? 0]}`;
    if (d.hits_addend !== undefined && d.hits_addend !== null) one.hitsAddend = d.hits_addend.value ?? 0;
    return one;
  });
  if (request.hits_addend) out.hitsAddend = request.hits_addend;
  let merged: Struct | undefined;
  for (const m of passed) if (m !== undefined) merge((merged ??= {}), m);
  if (merged !== undefined && Object.keys(merged).length > 0) out.metadata = merged;
  return out;
}

const isStruct = (v: MetadataValue | undefined): v is Struct => v !== null && typeof v === "object" && !Array.isArray(v);

/** envoyproxy/ratelimit's mergeMetadata: a key already there is kept, unless both are maps (merged in turn). */
function merge(into: Struct, from: { readonly [key: string]: MetadataValue }): void {
  for (const key of Object.keys(from)) {
    const have = into[key];
    const add = from[key]!;
    if (have === undefined) into[key] = isStruct(add) ? copy(add) : add;
    else if (isStruct(have) && isStruct(add)) merge(have, add);
  }
}

/** A rule's metadata is frozen and shared by every answer: a merge writes into a copy. */
function copy(s: { readonly [key: string]: MetadataValue }): Struct {
  const out: Struct = {};
  for (const key of Object.keys(s)) {
    const v = s[key]!;
    out[key] = isStruct(v) ? copy(v) : v;
  }
  return out;
}

import type { PolicyFile } from "../files.js";
import { PolicyError } from "../errors.js";

/** Levels of nested descriptors at most: an RLS request's descriptor has at most 32 entries, so deeper never matches. */
export const MAX_DESCRIPTOR_DEPTH = 64;
/** Levels of nested metadata at most (google.protobuf.Struct inside Struct). */
const MAX_METADATA_DEPTH = 32;

/** ratelimit.config.ratelimit.v3.RateLimitConfig as decoded (protos.ts, DECODE_OPTIONS). */
interface RateLimitConfig {
  readonly name: string;
  readonly domain: string;
  readonly descriptors: readonly Descriptor[];
}

interface Descriptor {
  readonly key: string;
  readonly value: string;
  readonly rate_limit?: RateLimitPolicy | null;
  readonly descriptors: readonly Descriptor[];
  readonly shadow_mode: boolean;
  readonly detailed_metric: boolean;
  readonly quota_mode: boolean;
  readonly metadata?: Struct | null;
}

interface RateLimitPolicy {
  readonly unit: string;
  readonly requests_per_unit: number;
  readonly unlimited: boolean;
  readonly name: string;
  readonly replaces: readonly { readonly name: string }[];
}

interface Struct {
  readonly fields?: Readonly<Record<string, Value>>;
}

/** google.protobuf.Value: protobufjs's built-in struct.proto names its fields in camelCase whatever keepCase says. */
interface Value {
  readonly nullValue?: unknown;
  readonly numberValue?: number;
  readonly stringValue?: string;
  readonly boolValue?: boolean;
  readonly structValue?: Struct;
  readonly listValue?: { readonly values?: readonly Value[] };
}

/**
 * One RateLimitConfig resource as a policy file in envoyproxy/ratelimit's format, so that the
 * file loader compiles it (one loader, one set of checks, one version hash for files and xDS).
 * The fields map as envoyproxy/ratelimit's own conversion maps them (src/config/config_xds.go):
 * proto3 defaults (an empty string, false, 0) are absent, a unit is written by its name, and
 * an `UNKNOWN` unit is left out of an `unlimited` rule (the loader refuses it anywhere else).
 * The text is JSON, which the YAML reader reads as it reads any flow-style document. `index`
 * names a resource that has no name.
 */
export function policyFileOf(resource: unknown, index: number): PolicyFile {
  const config = resource as RateLimitConfig;
  const name = config.name !== "" ? config.name : `resource-${index}`;
  const where = `xDS resource '${name}'`;
  const document = { domain: config.domain, descriptors: descriptorsOf(config.descriptors, where, 1) };
  return { path: where, name, text: JSON.stringify(document, null, 1) };
}

function descriptorsOf(descriptors: readonly Descriptor[], where: string, depth: number): object[] {
  if (depth > MAX_DESCRIPTOR_DEPTH) throw new PolicyError(where, `descriptors nested over ${MAX_DESCRIPTOR_DEPTH} levels deep`);
  return descriptors.map((d) => {
    const out: Record<string, unknown> = { key: d.key };
    if (d.value !== "") out.value = d.value;
    if (d.rate_limit) out.rate_limit = rateLimitOf(d.rate_limit);
    if (d.descriptors.length > 0) out.descriptors = descriptorsOf(d.descriptors, where, depth + 1);
    if (d.shadow_mode) out.shadow_mode = true;
    if (d.detailed_metric) out.detailed_metric = true;
    if (d.quota_mode) out.quota_mode = true;
    if (d.metadata) out.metadata = structOf(d.metadata, where, 1);
    return out;
  });
}

function rateLimitOf(policy: RateLimitPolicy): object {
  const out: Record<string, unknown> = {};
  if (policy.unlimited) {
    out.unlimited = true;
    if (policy.unit !== "UNKNOWN") out.unit = policy.unit;
  } else {
    out.unit = policy.unit;
    out.requests_per_unit = policy.requests_per_unit;
  }
  if (policy.name !== "") out.name = policy.name;
  if (policy.replaces.length > 0) out.replaces = policy.replaces.map((r) => ({ name: r.name }));
  return out;
}

function structOf(struct: Struct, where: string, depth: number): Record<string, unknown> {
  if (depth > MAX_METADATA_DEPTH) throw new PolicyError(where, `metadata nested over ${MAX_METADATA_DEPTH} levels deep`);
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(struct.fields ?? {})) out[key] = valueOf(value, where, depth);
  return out;
}

function valueOf(value: Value, where: string, depth: number): unknown {
  if (value.structValue !== undefined) return structOf(value.structValue, where, depth + 1);
  if (value.listValue !== undefined) {
    if (depth + 1 > MAX_METADATA_DEPTH) throw new PolicyError(where, `metadata nested over ${MAX_METADATA_DEPTH} levels deep`);
    return (value.listValue.values ?? []).map((v) => valueOf(v, where, depth + 1));
  }
  if (value.stringValue !== undefined) return value.stringValue;
  // A NaN or an infinity has no JSON: kept as text rather than turned into null.
  if (value.numberValue !== undefined) return Number.isFinite(value.numberValue) ? value.numberValue : String(value.numberValue);
  if (value.boolValue !== undefined) return value.boolValue;
  return null;
}

import { ALGORITHM_NAMES, type AlgorithmName } from "../algorithms/index.js";
import { REQUEST_BOUNDS } from "../decision.js";
import { compileGlob, GlobIndex } from "./glob.js";
import { counterPart, metricSegment, NodeKind, type KeyGroup, type RlsDomain, type RlsLevel, type RlsNode } from "./rls-domain.js";
import type { MetadataValue, RlsMatch, RlsRule, RlsUnit } from "./types.js";
import { POLICY_BOUNDS, type YamlNode, type YamlReader } from "./yaml-reader.js";

/** Seconds in each unit, as envoyproxy/ratelimit counts them (a month is 30 days, a year 365). */
export const UNIT_SECONDS: Readonly<Record<RlsUnit, number>> = Object.freeze({
  second: 1,
  minute: 60,
  hour: 3600,
  day: 86_400,
  week: 604_800,
  month: 2_592_000,
  year: 31_536_000,
});

const DESCRIPTOR_KEYS = [
  "key",
  "value",
  "rate_limit",
  "descriptors",
  "shadow_mode",
  "detailed_metric",
  "value_to_metric",
  "share_threshold",
  "quota_mode",
  "count_blocked",
  "metadata",
];
const RATE_LIMIT_KEYS = ["unit", "requests_per_unit", "unit_multiplier", "unlimited", "name", "replaces", "algorithm", "duration"];
/** requests_per_unit: the RLS wire's uint32, as envoyproxy/ratelimit takes it (token budgets) */
const LIMIT = { min: 0, max: REQUEST_BOUNDS.chargeLimit.max };
const DURATION = REQUEST_BOUNDS.duration;

/** What the nodes above a node say about it while the tree is compiled. */
interface Ancestry {
  /** the joined counterKey so far, undefined once a level depends on the request's value */
  readonly counter: string | undefined;
  /** the static metric key so far: `domain.key_value.key` */
  readonly metric: string;
  /** a level so far depends on the request's value */
  readonly dynamic: boolean;
  /** such a level asks for its value in the metric key */
  readonly valueToMetric: boolean;
  /** levels above (0 at the domain's top) */
  readonly depth: number;
}

/** One RLS domain document (`domain` and `descriptors`), compiled; every problem refused. */
export function compileDomain(reader: YamlReader, top: Map<string, YamlNode>): RlsDomain {
  const name = reader.text(top.get("domain") ?? null, "domain");
  if (name === undefined) reader.fail(top.get("domain") ?? null, "empty domain");
  const state = { hasReplaces: false };
  const root = compileLevel(reader, top.get("descriptors") ?? null, name, { counter: "", metric: name, dynamic: false, valueToMetric: false, depth: 0 }, state);
  return Object.freeze({ name, root, hasReplaces: state.hasReplaces });
}

function compileLevel(reader: YamlReader, raw: YamlNode, where: string, above: Ancestry, state: { hasReplaces: boolean }): RlsLevel {
  const byKey = new Map<string, { exact: Map<string, RlsNode>; wildcards: GlobIndex<RlsNode> | undefined; any: RlsNode | undefined }>();
  if (above.depth >= POLICY_BOUNDS.depth)
    reader.fail(raw, `descriptors nested more than ${POLICY_BOUNDS.depth} levels deep under ${where} (the bound of a policy)`);
  const items = reader.list(raw, `descriptors of ${where}`);
  // invariant: a policy compiles at most POLICY_BOUNDS.descriptors descriptors, all files together
  reader.budget.descriptors -= items.length;
  if (reader.budget.descriptors < 0) reader.fail(raw, `more than ${POLICY_BOUNDS.descriptors} descriptors in the policy (the bound of a policy)`);
  for (const item of items) {
    const fields = reader.map(item, `a descriptors entry of ${where}`, DESCRIPTOR_KEYS);
    const key = reader.text(fields.get("key") ?? null, "key");
    if (key === undefined) reader.fail(item, `descriptor has empty key (under ${where})`);
    // An empty value is no value: the key alone, as envoyproxy/ratelimit reads it.
    const value = reader.text(fields.get("value") ?? null, "value");
    const composite = `${where}.${value === undefined ? key : `${key}_${value}`}`;
    let group = byKey.get(key);
    if (group === undefined) byKey.set(key, (group = { exact: new Map(), wildcards: undefined, any: undefined }));
    const kind = value === undefined ? NodeKind.Any : value.includes("*") ? NodeKind.Wildcard : NodeKind.Exact;
    const taken = kind === NodeKind.Any ? group.any !== undefined : kind === NodeKind.Exact ? group.exact.has(value!) : hasPattern(group.wildcards, value!);
    if (taken) reader.fail(item, `duplicate descriptor composite key '${composite}'`);
    const node = compileNode(reader, fields, { key, value, kind, composite }, above, state);
    if (kind === NodeKind.Any) group.any = node;
    else if (kind === NodeKind.Exact) group.exact.set(value!, node);
    else {
      group.wildcards ??= new GlobIndex();
      // The first wildcard in file order wins among those that match.
      group.wildcards.add(node.glob!, -group.wildcards.size, node);
    }
  }
  return Object.freeze({ byKey: byKey as ReadonlyMap<string, KeyGroup> });
}

function hasPattern(index: GlobIndex<RlsNode> | undefined, pattern: string): boolean {
  // Two patterns that fold to the same one (`a**` and `a*`) are one pattern written twice.
  return index !== undefined && index.has(compileGlob(pattern).source);
}

interface Head {
  readonly key: string;
  readonly value: string | undefined;
  readonly kind: NodeKind;
  readonly composite: string;
}

function compileNode(reader: YamlReader, fields: Map<string, YamlNode>, head: Head, above: Ancestry, state: { hasReplaces: boolean }): RlsNode {
  const { key, value, kind, composite } = head;
  const flag = (name: string) => reader.bool(fields.get(name) ?? null, name) ?? false;
  const shareThreshold = flag("share_threshold") && kind === NodeKind.Wildcard;
  const valueToMetric = flag("value_to_metric");
  const detailedMetric = flag("detailed_metric");
  const shadow = flag("shadow_mode");
  const quotaMode = flag("quota_mode");
  const countBlocked = reader.bool(fields.get("count_blocked") ?? null, "count_blocked");
  const metadata = compileMetadata(reader, fields.get("metadata") ?? null, composite);
  const glob = kind === NodeKind.Wildcard ? compileGlob(value!) : undefined;
  const counterKeyPart = counterPart(key);
  const counterSegment =
    kind === NodeKind.Exact ? counterKeyPart + "_" + counterPart(value!) : shareThreshold ? counterKeyPart + "_" + counterPart(glob!.source, true) : undefined;
  const dynamicHere = counterSegment === undefined;
  const shape = { key, kind, value: glob?.source ?? value, shareThreshold, valueToMetric } as RlsNode;
  const here: Ancestry = {
    counter:
      above.counter === undefined || counterSegment === undefined ? undefined : above.counter === "" ? counterSegment : `${above.counter}.${counterSegment}`,
    metric: `${above.metric}.${metricSegment(shape, undefined, false)}`,
    dynamic: above.dynamic || dynamicHere,
    valueToMetric: above.valueToMetric || (dynamicHere && valueToMetric),
    depth: above.depth + 1,
  };
  const runtimeMetric = here.valueToMetric || (detailedMetric && here.dynamic);
  const rule = compileRule(reader, fields.get("rate_limit") ?? null, composite, { shadow, quotaMode, countBlocked, metadata, metricKey: here.metric });
  if (rule !== undefined && rule.replaces!.length > 0) state.hasReplaces = true;
  const children = fields.get("descriptors") ? compileLevel(reader, fields.get("descriptors")!, composite, here, state) : undefined;
  const staticMatch: RlsMatch | undefined =
    rule !== undefined && here.counter !== undefined && !runtimeMetric
      ? Object.freeze({ rule, counterKey: here.counter, metricKey: rule.metricKey })
      : undefined;
  return Object.freeze({
    key,
    kind,
    value: glob?.source ?? value,
    glob,
    shareThreshold,
    valueToMetric,
    detailedMetric,
    rule,
    children: children !== undefined && children.byKey.size > 0 ? children : undefined,
    counterSegment,
    counterKeyPart,
    staticMatch,
    runtimeMetric,
  });
}

interface RuleContext {
  readonly shadow: boolean;
  readonly quotaMode: boolean;
  readonly countBlocked: boolean | undefined;
  readonly metadata: RlsRule["metadata"];
  readonly metricKey: string;
}

/** A descriptor's `metadata`: a map of anything (envoyproxy/ratelimit validates none of its keys); undefined when absent or empty. */
function compileMetadata(reader: YamlReader, raw: YamlNode, where: string): RlsRule["metadata"] {
  if (raw === null) return undefined;
  const value = reader.plain(raw, `metadata of ${where}`);
  if (value === null) return undefined;
  if (typeof value !== "object" || Array.isArray(value)) reader.fail(raw, `metadata of ${where} must be a map`);
  return Object.keys(value).length > 0 ? deepFreeze(value as Record<string, MetadataValue>) : undefined;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object") for (const v of Object.values(value)) deepFreeze(v);
  return Object.freeze(value);
}

function compileRule(reader: YamlReader, raw: YamlNode, where: string, context: RuleContext): RlsRule | undefined {
  if (raw === null) return undefined;
  const fields = reader.map(raw, `rate_limit of ${where}`, RATE_LIMIT_KEYS);
  const at = (name: string) => fields.get(name) ?? null;
  const name = reader.text(at("name"), "name");
  const replaces = reader.list(at("replaces"), `replaces of ${where}`).map((entry) => {
    const replaced = reader.text(reader.map(entry, `a replaces entry of ${where}`, ["name"]).get("name") ?? null, "name");
    if (replaced === undefined) reader.fail(entry, `should not have an empty replaces entry (${where})`);
    if (replaced === name) reader.fail(entry, `replaces should not contain name of same descriptor (${where} is '${name}')`);
    return replaced;
  });
  const unlimited = reader.bool(at("unlimited"), "unlimited") ?? false;
  const unitText = reader.text(at("unit"), "unit");
  const multiplier = reader.int(at("unit_multiplier"), "unit_multiplier", 1, DURATION.max);
  const seconds = reader.int(at("duration"), "duration", DURATION.min, DURATION.max);
  const algorithmText = reader.text(at("algorithm"), "algorithm");
  if (algorithmText !== undefined && !(ALGORITHM_NAMES as readonly string[]).includes(algorithmText)) {
    reader.fail(at("algorithm"), `unknown algorithm '${algorithmText}' (${ALGORITHM_NAMES.join(", ")})`);
  }
  const algorithm = (algorithmText ?? "fixed-window") as AlgorithmName;
  const rule = {
    name,
    replaces: Object.freeze(replaces),
    algorithm,
    shadow: context.shadow,
    quotaMode: context.quotaMode,
    countBlocked: context.countBlocked,
    metadata: context.metadata,
    metricKey: context.metricKey,
  };
  if (unlimited) {
    const window = unitText !== undefined ? "unit" : seconds !== undefined ? "duration" : multiplier !== undefined ? "unit_multiplier" : undefined;
    if (window !== undefined) reader.fail(raw, `should not specify rate limit ${window} when unlimited (${where})`);
    return Object.freeze({ ...rule, limit: 0, duration: 0, unit: undefined, unlimited: true });
  }
  const limit = reader.int(at("requests_per_unit"), "requests_per_unit", LIMIT.min, LIMIT.max);
  if (limit === undefined) reader.fail(raw, `requests_per_unit is required (0 blocks every request) in ${where}`);
  if (unitText !== undefined && seconds !== undefined) reader.fail(raw, `give unit or duration, not both (${where})`);
  if (seconds !== undefined) {
    if (multiplier !== undefined) reader.fail(raw, `unit_multiplier goes with unit, not duration (${where})`);
    return Object.freeze({ ...rule, limit, duration: seconds, unit: undefined, unlimited: false });
  }
  const unit = unitText?.toLowerCase() as RlsUnit | undefined;
  if (unit === undefined || !Object.hasOwn(UNIT_SECONDS, unit)) {
    reader.fail(at("unit") ?? raw, `invalid rate limit unit '${unitText ?? ""}' (second, minute, hour, day, week, month, year; or duration: <seconds>)`);
  }
  const duration = UNIT_SECONDS[unit] * (multiplier ?? 1);
  if (duration > DURATION.max) reader.fail(raw, `unit × unit_multiplier is ${duration} s, over ${DURATION.max} (${where})`);
  return Object.freeze({ ...rule, limit, duration, unit, unlimited: false });
}

import type { Glob, GlobIndex } from "./glob.js";
import type { RlsDescriptorEntries, RlsMatch, RlsRule } from "./types.js";

/** How a descriptor node's `value` matches a request entry's value. */
export const enum NodeKind {
  /** `value` given without `*`: that value only */
  Exact,
  /** `value` with `*`: the values it matches */
  Wildcard,
  /** no `value`: any value, one counter per value */
  Any,
}

/** One `descriptors` entry of a policy file, compiled. Immutable. */
export interface RlsNode {
  readonly key: string;
  readonly kind: NodeKind;
  /** the exact value or the pattern; undefined for Any */
  readonly value: string | undefined;
  readonly glob: Glob | undefined;
  readonly shareThreshold: boolean;
  readonly valueToMetric: boolean;
  readonly detailedMetric: boolean;
  readonly rule: RlsRule | undefined;
  readonly children: RlsLevel | undefined;
  /** counterKey segment when it does not depend on the request's value (exact, or a shared wildcard) */
  readonly counterSegment: string | undefined;
  readonly counterKeyPart: string;
  /** the match itself when nothing in it depends on the request's values */
  readonly staticMatch: RlsMatch | undefined;
  /** whether a match ending here writes request values into its metric key */
  readonly runtimeMetric: boolean;
}

/** The candidates for one key at one level, tried in this order. */
export interface KeyGroup {
  readonly exact: Map<string, RlsNode>;
  /** wildcard values, the first in file order winning among those that match */
  readonly wildcards: GlobIndex<RlsNode> | undefined;
  readonly any: RlsNode | undefined;
}

export interface RlsLevel {
  readonly byKey: ReadonlyMap<string, KeyGroup>;
}

export interface RlsDomain {
  readonly name: string;
  readonly root: RlsLevel;
  /** whether any rule of the domain names others in `replaces` */
  readonly hasReplaces: boolean;
}

/**
 * A counterKey part: `\`, `.`, `_` and `*` escaped with `\`, so that the joined key is
 * one-to-one with the entries (a value holding `.` or `_` cannot pose as another
 * descriptor's entries, and no request value can equal a shared wildcard's pattern).
 * `keepStars` leaves a shared pattern's `*` as written.
 */
export function counterPart(text: string, keepStars = false): string {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // \ . _ *
    if (c === 92 || c === 46 || c === 95 || (c === 42 && !keepStars)) {
      return text.replace(keepStars ? /[\\._]/g : /[\\._*]/g, "\\$&");
    }
  }
  return text;
}

/** Nodes of the walk in progress; matching is synchronous, so one array serves every call. */
const path: RlsNode[] = [];

/**
 * The rule of one descriptor: at each level the entry's key and value exactly, else the
 * first wildcard value (in file order) that matches, else the key alone; the walk never
 * backs up to try a less specific node, and a rule applies only to a request of exactly
 * as many entries as its depth.
 */
export function matchDescriptor(domain: RlsDomain, entries: RlsDescriptorEntries): RlsMatch | undefined {
  const n = entries.length;
  let level = domain.root;
  for (let i = 0; i < n; i++) {
    const entry = entries[i]!;
    const group = level.byKey.get(entry.key);
    if (group === undefined) return undefined;
    const node = group.exact.get(entry.value) ?? group.wildcards?.best(entry.value) ?? group.any;
    if (node === undefined) return undefined;
    path[i] = node;
    if (i === n - 1) return node.rule === undefined ? undefined : (node.staticMatch ?? dynamicMatch(domain, node, entries));
    if (node.children === undefined) return undefined;
    level = node.children;
  }
  return undefined;
}

function dynamicMatch(domain: RlsDomain, leaf: RlsNode, entries: RlsDescriptorEntries): RlsMatch {
  const rule = leaf.rule!;
  let counterKey = "";
  let metricKey = domain.name;
  for (let i = 0; i < entries.length; i++) {
    const node = path[i]!;
    const value = entries[i]!.value;
    if (i > 0) counterKey += ".";
    counterKey += node.counterSegment ?? node.counterKeyPart + "_" + counterPart(value);
    if (leaf.runtimeMetric) metricKey += "." + metricSegment(node, value, leaf.detailedMetric);
  }
  return { rule, counterKey, metricKey: leaf.runtimeMetric ? metricKey : rule.metricKey };
}

/**
 * A level of a metric key: `key_value` for an exact value, `key_pattern` for a wildcard,
 * `key` for the key alone; the request's value replaces the pattern or follows the key
 * only where value_to_metric (this level) or detailed_metric (the rule's level) ask, and
 * never under share_threshold, whose values share one counter and one series.
 */
export function metricSegment(node: RlsNode, value: string | undefined, detailed: boolean): string {
  const runtime = value !== undefined && !node.shareThreshold && (node.valueToMetric || detailed);
  switch (node.kind) {
    case NodeKind.Exact:
      return node.key + "_" + node.value;
    case NodeKind.Wildcard:
      return node.key + "_" + (runtime ? value : node.value);
    case NodeKind.Any:
      return runtime ? node.key + "_" + value : node.key;
  }
}

/** Every descriptor's rule, with `replaces` applied across the request's matches. */
export function matchDescriptors(domain: RlsDomain | undefined, descriptors: readonly RlsDescriptorEntries[]): (RlsMatch | undefined)[] {
  const out = new Array<RlsMatch | undefined>(descriptors.length);
  if (domain === undefined) return out.fill(undefined);
  for (let i = 0; i < descriptors.length; i++) out[i] = matchDescriptor(domain, descriptors[i]!);
  if (domain.hasReplaces) applyReplaces(out);
  return out;
}

/** A matched rule named in another matched rule's `replaces` is dropped (both in one request). */
function applyReplaces(matches: (RlsMatch | undefined)[]): void {
  let replaced: Set<string> | undefined;
  for (const match of matches) {
    if (match === undefined) continue;
    for (const name of match.rule.replaces ?? []) (replaced ??= new Set()).add(name);
  }
  if (replaced === undefined) return;
  for (let i = 0; i < matches.length; i++) {
    const name = matches[i]?.rule.name;
    if (name !== undefined && replaced.has(name)) matches[i] = undefined;
  }
}

import { ALGORITHM_NAMES, type AlgorithmName } from "../algorithms/index.js";
import { REQUEST_BOUNDS } from "../decision.js";
import { PolicyError } from "./errors.js";
import { compileGlob, globMatches, globsIntersect, type Glob } from "./glob.js";
import type { Override } from "./types.js";
import type { YamlNode, YamlReader } from "./yaml-reader.js";

const ENTRY_KEYS = ["namespace", "identifier", "limit", "duration", "algorithm", "shadow"];
/** an effective namespace: `namespace.slug` */
const NAMESPACE_MAX = REQUEST_BOUNDS.namespace.max + 1 + REQUEST_BOUNDS.product.max;
const IDENTIFIER_MAX = REQUEST_BOUNDS.identifier.max;

/** One `overrides` entry, compiled, with where it was written. */
export interface OverrideEntry {
  readonly namespace: Glob;
  /** undefined: the namespace alone */
  readonly identifier: Glob | undefined;
  readonly override: Override;
  /** the file the entry is in (as PolicyError names it) */
  readonly file: string;
  /**
   * How specific the entry is; the higher wins, compared as the tuple (identifier: exact 2 >
   * wildcard 1 > absent 0, identifier's literal characters, namespace: exact 1 > wildcard 0,
   * namespace's literal characters), packed into one number.
   */
  readonly rank: number;
}

/** Specificity as one number: the tuple of OverrideEntry.rank, each part in its own bits. */
export function rankOf(namespace: Glob, identifier: Glob | undefined): number {
  const idClass = identifier === undefined ? 0 : identifier.hasStar ? 1 : 2;
  const idLiterals = identifier?.literals ?? 0;
  return ((idClass * 1024 + idLiterals) * 2 + (namespace.hasStar ? 0 : 1)) * 1024 + namespace.literals;
}

/**
 * The `overrides` list of one document. `file` names the file in errors, `label` in each
 * override's `source` (`label#index`, counted across the file's documents from `first`).
 */
export function compileOverrides(reader: YamlReader, raw: YamlNode, label: string, first: number): OverrideEntry[] {
  return reader.list(raw, "overrides").map((item, i) => {
    const index = first + i;
    const what = `override #${index}`;
    const fields = reader.map(item, what, ENTRY_KEYS);
    const at = (name: string) => fields.get(name) ?? null;
    const namespace = reader.text(at("namespace"), "namespace");
    if (namespace === undefined) reader.fail(item, `${what} needs a namespace`);
    if (namespace.length > NAMESPACE_MAX) reader.fail(at("namespace"), `${what}: namespace is over ${NAMESPACE_MAX} characters`);
    const identifier = reader.text(at("identifier"), "identifier");
    if (identifier !== undefined && identifier.length > IDENTIFIER_MAX)
      reader.fail(at("identifier"), `${what}: identifier is over ${IDENTIFIER_MAX} characters`);
    const limit = reader.int(at("limit"), "limit", 0, REQUEST_BOUNDS.limit.max);
    const duration = reader.int(at("duration"), "duration", REQUEST_BOUNDS.duration.min, REQUEST_BOUNDS.duration.max);
    const algorithm = reader.text(at("algorithm"), "algorithm");
    if (algorithm !== undefined && !(ALGORITHM_NAMES as readonly string[]).includes(algorithm)) {
      reader.fail(at("algorithm"), `unknown algorithm '${algorithm}' (${ALGORITHM_NAMES.join(", ")})`);
    }
    const shadow = reader.bool(at("shadow"), "shadow") ?? false;
    if (limit === undefined && (duration !== undefined || algorithm !== undefined)) reader.fail(item, `${what}: duration and algorithm go with a limit`);
    if (limit === undefined && !shadow) reader.fail(item, `${what} sets nothing: give a limit (0 blocks), or shadow: true`);
    const ns = compileGlob(namespace);
    const id = identifier === undefined ? undefined : compileGlob(identifier);
    const override: Override = Object.freeze({ limit, duration, algorithm: algorithm as AlgorithmName | undefined, shadow, source: `${label}#${index}` });
    return Object.freeze({ namespace: ns, identifier: id, override, file: reader.file, rank: rankOf(ns, id) });
  });
}

/**
 * Refuses two entries that no request could choose between: the same rank and patterns
 * that some one (namespace, identifier) matches both (identical patterns included). With
 * ties refused, every key has at most one most specific entry. Entries are bucketed by
 * rank (and by their exact part), then sorted by literal prefix so that only entries whose
 * prefixes are compatible are compared: 10,000 entries cost a sort, not 50 million checks.
 */
export function refuseTies(entries: readonly OverrideEntry[]): void {
  const position = new Map(entries.map((entry, i) => [entry, i]));
  const exact = new Map<string, OverrideEntry>();
  const buckets = new Map<string, OverrideEntry[]>();
  for (const entry of entries) {
    const { namespace, identifier } = entry;
    if (!namespace.hasStar && (identifier === undefined || !identifier.hasStar)) {
      // Exact namespace and exact (or no) identifier: only the same pair ties.
      const key = `${namespace.source}\u0000${identifier === undefined ? "" : "i" + identifier.source}`;
      const seen = exact.get(key);
      if (seen !== undefined) throw tie(seen, entry, position);
      exact.set(key, entry);
      continue;
    }
    const exactPart = identifier !== undefined && !identifier.hasStar ? `i${identifier.source}` : !namespace.hasStar ? `n${namespace.source}` : "";
    const key = `${entry.rank}\u0000${exactPart}`;
    let bucket = buckets.get(key);
    if (bucket === undefined) buckets.set(key, (bucket = []));
    bucket.push(entry);
  }
  // In a bucket, `main` is a pattern with a star: the identifier when it has one, else the namespace.
  const main = (e: OverrideEntry) => (e.identifier !== undefined && e.identifier.hasStar ? e.identifier : e.namespace);
  const other = (e: OverrideEntry) => (main(e) === e.namespace ? e.identifier : e.namespace);
  for (const bucket of buckets.values()) {
    if (bucket.length < 2) continue;
    bucket.sort((a, b) => (main(a).prefix < main(b).prefix ? -1 : main(a).prefix > main(b).prefix ? 1 : 0));
    for (let i = 0; i < bucket.length; i++) {
      const a = bucket[i]!;
      // Sorted by prefix, the patterns whose prefix extends a's follow it; no other can overlap it.
      for (let j = i + 1; j < bucket.length && main(bucket[j]!).prefix.startsWith(main(a).prefix); j++) {
        const b = bucket[j]!;
        if (overlap(main(a), main(b)) && overlap(other(a), other(b))) throw tie(a, b, position);
      }
    }
  }
}

/** Whether one string matches both (both absent: the namespace alone on both sides). */
function overlap(a: Glob | undefined, b: Glob | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (!a.hasStar && !b.hasStar) return a.source === b.source;
  if (!a.hasStar) return globMatches(b, a.source);
  if (!b.hasStar) return globMatches(a, b.source);
  if (!a.suffix.endsWith(b.suffix) && !b.suffix.endsWith(a.suffix)) return false;
  return globsIntersect(a.source, b.source);
}

function tie(a: OverrideEntry, b: OverrideEntry, position: Map<OverrideEntry, number>): PolicyError {
  const show = (e: OverrideEntry) => `namespace '${e.namespace.source}'${e.identifier === undefined ? "" : ` identifier '${e.identifier.source}'`}`;
  const identical = a.namespace.source === b.namespace.source && a.identifier?.source === b.identifier?.source;
  // Name the later of the two, where the operator most likely just added it.
  const [first, second] = position.get(a)! < position.get(b)! ? [a, b] : [b, a];
  return new PolicyError(
    second.file,
    identical
      ? `override ${second.override.source} repeats ${first.override.source} (${show(second)})`
      : `overrides ${first.override.source} (${show(first)}) and ${second.override.source} (${show(second)}) tie: equally specific, and one key can match both`,
  );
}

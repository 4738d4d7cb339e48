import { BRAND } from "./worker/transfer.js";
import { GlobIndex } from "./glob.js";
import type { OverrideEntry } from "./overrides.js";
import type { Override } from "./types.js";

/** The entries of one exact namespace. */
interface ForNamespace {
  /** exact and wildcard identifiers, by rank (an exact one outranks every wildcard) */
  identifiers: GlobIndex<OverrideEntry> | undefined;
  /** the namespace alone */
  alone: OverrideEntry | undefined;
}

/** The entries whose namespace has a `*`: each lookup consults them, so they exist only when some entry needs them. */
interface WildNamespaces {
  /** exact identifier → its entries, indexed by namespace pattern */
  readonly byIdentifier: Map<string, GlobIndex<OverrideEntry>>;
  /** wildcard identifiers, indexed by the identifier, the namespace checked too */
  readonly wildIdentifier: GlobIndex<OverrideEntry>;
  /** the namespace alone */
  readonly alone: GlobIndex<OverrideEntry>;
}

/**
 * The overrides of a policy, laid out so that a lookup never scans the entries, and a
 * request in a namespace no entry names costs one read of a small Map. Exact namespaces
 * first: each holds one GlobIndex of its identifiers (exact texts and `*` patterns, one pass
 * over the identifier finds them all) and its namespace-alone entry. Entries with a
 * wildcard namespace (rare) sit apart and are consulted only when there is one.
 *
 * Precedence (docs/policy.md) is the entries' rank: an exact identifier beats a wildcard
 * identifier beats the namespace alone; then an exact namespace beats a wildcard one;
 * between two wildcards the one with more literal characters wins. Ties were refused at
 * load (refuseTies), so the winner is unique. Immutable once built.
 *
 * Measured against the layout it replaced (a Map by identifier, then by namespace, and
 * prefix tries with a Map per character), 10,000 entries, 2 shared cores at load 4-8:
 * bench/policy-match.mjs (its strings reused, so V8 has their hashes cached) no match
 * 41-96 → 9-15 ns, namespace alone 41-100 → 16-18 ns, wildcard identifier 295-906 →
 * 173-196 ns, exact identifier 44-117 → 124-173 ns; with a fresh string per call, as
 * JSON.parse gives the server (ns over the parse, medians of 15): a miss in the bench's
 * namespace of 9,999 entries 115-126 → 60-73, its namespace-alone match 70-127 → 1-8,
 * an exact identifier 217-433 → 249-404, a wildcard one 267-454 → 154-161.
 */
export class OverrideIndex {
  /** what this object is once copied to another thread (transfer.ts) */
  readonly [BRAND] = "OverrideIndex";
  private readonly byNamespace = new Map<string, ForNamespace>();
  private readonly wild: WildNamespaces | undefined;
  readonly size: number;

  constructor(entries: readonly OverrideEntry[]) {
    this.size = entries.length;
    let wild: WildNamespaces | undefined;
    for (const entry of entries) {
      const { namespace, identifier } = entry;
      if (!namespace.hasStar) {
        let forNs = this.byNamespace.get(namespace.source);
        if (forNs === undefined) this.byNamespace.set(namespace.source, (forNs = { identifiers: undefined, alone: undefined }));
        if (identifier === undefined) forNs.alone = entry;
        else (forNs.identifiers ??= new GlobIndex()).add(identifier, entry.rank, entry);
        continue;
      }
      wild ??= { byIdentifier: new Map(), wildIdentifier: new GlobIndex(), alone: new GlobIndex() };
      if (identifier === undefined) wild.alone.add(namespace, entry.rank, entry);
      else if (identifier.hasStar) wild.wildIdentifier.add(identifier, entry.rank, entry, namespace);
      else {
        let index = wild.byIdentifier.get(identifier.source);
        if (index === undefined) wild.byIdentifier.set(identifier.source, (index = new GlobIndex()));
        index.add(namespace, entry.rank, entry);
      }
    }
    this.wild = wild;
  }

  /** The most specific override for an effective namespace and identifier. Allocates nothing. */
  match(namespace: string, identifier: string): Override | undefined {
    if (this.size === 0) return undefined;
    const forNs = this.byNamespace.get(namespace);
    const wild = this.wild;
    if (wild === undefined) {
      if (forNs === undefined) return undefined;
      return (forNs.identifiers?.best(identifier) ?? forNs.alone)?.override;
    }
    // An identifier entry of either kind of namespace outranks every namespace-alone entry.
    let found = forNs?.identifiers?.best(identifier);
    if (found === undefined || found.identifier!.hasStar) {
      // Below an exact identifier under an exact namespace: the same identifier under a wildcard one ...
      const exact = wild.byIdentifier.size === 0 ? undefined : wild.byIdentifier.get(identifier)?.best(namespace);
      if (exact !== undefined) return exact.override;
      // ... then wildcard identifiers of either kind of namespace, by rank.
      const other = wild.wildIdentifier.size === 0 ? undefined : wild.wildIdentifier.best(identifier, namespace);
      if (other !== undefined && (found === undefined || other.rank > found.rank)) found = other;
    }
    if (found !== undefined) return found.override;
    return (forNs?.alone ?? (wild.alone.size === 0 ? undefined : wild.alone.best(namespace)))?.override;
  }
}

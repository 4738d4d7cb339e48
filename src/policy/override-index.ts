import { GlobIndex } from "./glob.js";
import type { OverrideEntry } from "./overrides.js";
import type { Override } from "./types.js";

interface ForIdentifier {
  readonly exactNamespace: Map<string, OverrideEntry>;
  readonly wildNamespace: GlobIndex<OverrideEntry>;
}

/**
 * The overrides of a policy, laid out so that a lookup is a few Map reads and prefix-trie
 * walks, never a scan of the entries: exact parts in Maps, `*` patterns in GlobIndexes.
 * Precedence (docs/policy.md): an exact identifier beats a wildcard identifier beats the
 * namespace alone; then an exact namespace beats a wildcard one; between two wildcards
 * the one with more literal characters wins. Ties were refused at load (refuseTies), so
 * the winner is unique. Immutable once built.
 */
export class OverrideIndex {
  /** exact identifier → its entries by namespace */
  private readonly byIdentifier = new Map<string, ForIdentifier>();
  /** exact namespace → its wildcard-identifier entries */
  private readonly wildIdentifierByNamespace = new Map<string, GlobIndex<OverrideEntry>>();
  /** wildcard identifier and wildcard namespace: indexed by the identifier, the namespace checked too */
  private readonly wildBoth = new GlobIndex<OverrideEntry>();
  /** exact namespace alone */
  private readonly namespaceAlone = new Map<string, OverrideEntry>();
  private readonly wildNamespaceAlone = new GlobIndex<OverrideEntry>();
  readonly size: number;

  constructor(entries: readonly OverrideEntry[]) {
    this.size = entries.length;
    for (const entry of entries) {
      const { namespace, identifier } = entry;
      if (identifier === undefined) {
        if (namespace.hasStar) this.wildNamespaceAlone.add(namespace, entry.rank, entry);
        else this.namespaceAlone.set(namespace.source, entry);
      } else if (!identifier.hasStar) {
        let forId = this.byIdentifier.get(identifier.source);
        if (forId === undefined) this.byIdentifier.set(identifier.source, (forId = { exactNamespace: new Map(), wildNamespace: new GlobIndex() }));
        if (namespace.hasStar) forId.wildNamespace.add(namespace, entry.rank, entry);
        else forId.exactNamespace.set(namespace.source, entry);
      } else if (!namespace.hasStar) {
        let index = this.wildIdentifierByNamespace.get(namespace.source);
        if (index === undefined) this.wildIdentifierByNamespace.set(namespace.source, (index = new GlobIndex()));
        index.add(identifier, entry.rank, entry);
      } else {
        this.wildBoth.add(identifier, entry.rank, entry, namespace);
      }
    }
  }

  /** The most specific override for an effective namespace and identifier. Allocates nothing. */
  match(namespace: string, identifier: string): Override | undefined {
    if (this.size === 0) return undefined;
    const forId = this.byIdentifier.get(identifier);
    if (forId !== undefined) {
      const found = forId.exactNamespace.get(namespace) ?? forId.wildNamespace.best(namespace);
      if (found !== undefined) return found.override;
    }
    const exactNamespace = this.wildIdentifierByNamespace.get(namespace)?.best(identifier);
    const wildNamespace = this.wildBoth.size === 0 ? undefined : this.wildBoth.best(identifier, namespace);
    if (exactNamespace !== undefined || wildNamespace !== undefined) {
      if (wildNamespace === undefined) return exactNamespace!.override;
      if (exactNamespace === undefined) return wildNamespace.override;
      return (exactNamespace.rank > wildNamespace.rank ? exactNamespace : wildNamespace).override;
    }
    const alone = this.namespaceAlone.get(namespace);
    if (alone !== undefined) return alone.override;
    return this.wildNamespaceAlone.size === 0 ? undefined : this.wildNamespaceAlone.best(namespace)?.override;
  }
}

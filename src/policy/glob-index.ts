import { globMatches, type Glob } from "./glob.js";

interface Entry<T> {
  readonly glob: Glob;
  /** higher wins among the patterns that match */
  readonly priority: number;
  readonly item: T;
  /** a second pattern the entry also needs to match (an override's namespace), if any */
  readonly also: Glob | undefined;
}

interface TrieNode<T> {
  next: Map<number, TrieNode<T>> | undefined;
  /** the entries whose literal prefix ends at this node */
  entries: Entry<T>[];
}

/**
 * `*` patterns indexed by their literal prefix, in a trie of character codes: a lookup
 * walks the value's characters once and tests only the patterns whose prefix the value
 * starts with, so 10,000 patterns with distinct prefixes cost a walk, not 10,000 tests.
 * Patterns that start with `*` are tested on every lookup. Immutable once built.
 */
export class GlobIndex<T> {
  private readonly root: TrieNode<T> = { next: undefined, entries: [] };
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(glob: Glob, priority: number, item: T, also?: Glob): void {
    let node = this.root;
    for (let i = 0; i < glob.prefix.length; i++) {
      const code = glob.prefix.charCodeAt(i);
      node.next ??= new Map();
      let child = node.next.get(code);
      if (child === undefined) {
        child = { next: undefined, entries: [] };
        node.next.set(code, child);
      }
      node = child;
    }
    node.entries.push({ glob, priority, item, also });
    this.count++;
  }

  /** Whether a pattern written as `source` (stars folded) is indexed already. */
  has(source: string): boolean {
    let node: TrieNode<T> | undefined = this.root;
    const prefix = source.split("*", 1)[0]!;
    for (let i = 0; i < prefix.length && node !== undefined; i++) node = node.next?.get(prefix.charCodeAt(i));
    return node !== undefined && node.entries.some((entry) => entry.glob.source === source);
  }

  /**
   * The item of the highest-priority pattern that matches `value` (and whose `also`
   * pattern, if any, matches `alsoValue`); undefined when none does. Allocates nothing.
   */
  best(value: string, alsoValue = ""): T | undefined {
    let found: Entry<T> | undefined;
    let node: TrieNode<T> | undefined = this.root;
    for (let depth = 0; node !== undefined; depth++) {
      const entries = node.entries;
      for (let k = 0; k < entries.length; k++) {
        const entry = entries[k]!;
        if (found !== undefined && entry.priority <= found.priority) continue;
        if (!globMatches(entry.glob, value)) continue;
        if (entry.also !== undefined && !globMatches(entry.also, alsoValue)) continue;
        found = entry;
      }
      if (depth >= value.length || node.next === undefined) break;
      node = node.next.get(value.charCodeAt(depth));
    }
    return found?.item;
  }
}

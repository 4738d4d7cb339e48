/**
 * `*` patterns, as policy files write them: `*` matches any run of characters (the empty
 * one too), every other character matches itself; there is no escape, so a literal `*`
 * cannot be matched on its own. Used by RLS descriptor values and by overrides'
 * namespaces and identifiers.
 */
export interface Glob {
  /** the pattern as written, with runs of `*` folded into one */
  readonly source: string;
  readonly hasStar: boolean;
  /** the literal text before the first `*` (the whole source when there is none) */
  readonly prefix: string;
  /** the literal text after the last `*` ("" when there is no `*`) */
  readonly suffix: string;
  /** the literal pieces between stars, in order (not the prefix or the suffix) */
  readonly middle: readonly string[];
  /** characters that are not `*`: how specific the pattern is */
  readonly literals: number;
}

/** `a**b` → `a*b`: the same strings match, and identical patterns compare equal. */
export function foldStars(pattern: string): string {
  return pattern.includes("**") ? pattern.replace(/\*{2,}/g, "*") : pattern;
}

export function compileGlob(pattern: string): Glob {
  const source = foldStars(pattern);
  const pieces = source.split("*");
  const hasStar = pieces.length > 1;
  return Object.freeze({
    source,
    hasStar,
    prefix: pieces[0]!,
    suffix: hasStar ? pieces[pieces.length - 1]! : "",
    middle: Object.freeze(pieces.slice(1, -1)),
    literals: source.length - (pieces.length - 1),
  });
}

/**
 * Whether `value` matches: the prefix and suffix in place, then each middle piece at its
 * leftmost place after the previous one (leftmost is always safe with `*` alone). Allocates
 * nothing: the hot path calls it.
 */
export function globMatches(glob: Glob, value: string): boolean {
  if (!glob.hasStar) return value === glob.source;
  const { prefix, suffix, middle } = glob;
  if (value.length < prefix.length + suffix.length) return false;
  if (!value.startsWith(prefix) || !value.endsWith(suffix)) return false;
  let at = prefix.length;
  const end = value.length - suffix.length;
  for (let i = 0; i < middle.length; i++) {
    const piece = middle[i]!;
    const found = value.indexOf(piece, at);
    if (found < 0 || found + piece.length > end) return false;
    at = found + piece.length;
  }
  return true;
}

/**
 * Whether some string matches both patterns: a search over the pairs of positions
 * (i in a, j in b) of the two patterns read as automata, where a `*` may stay put while the
 * other side reads a character, or step past itself. At most (|a|+1)(|b|+1) states, each
 * visited once; only load-time tie checks call it.
 */
export function globsIntersect(a: string, b: string): boolean {
  const la = a.length;
  const lb = b.length;
  const width = lb + 1;
  const seen = new Uint8Array((la + 1) * width);
  const stack: number[] = [0];
  seen[0] = 1;
  const push = (i: number, j: number) => {
    const at = i * width + j;
    if (seen[at] === 0) {
      seen[at] = 1;
      stack.push(at);
    }
  };
  while (stack.length > 0) {
    const at = stack.pop()!;
    const i = Math.floor(at / width);
    const j = at % width;
    if (i === la && j === lb) return true;
    const ca = i < la ? a[i] : undefined;
    const cb = j < lb ? b[j] : undefined;
    // a star matching nothing
    if (ca === "*") push(i + 1, j);
    if (cb === "*") push(i, j + 1);
    // one character read by both sides
    if (ca !== undefined && cb !== undefined) {
      if (ca === "*" && cb !== "*") push(i, j + 1);
      else if (cb === "*" && ca !== "*") push(i + 1, j);
      else if (ca === cb && ca !== "*") push(i + 1, j + 1);
    }
  }
  return false;
}

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

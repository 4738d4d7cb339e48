import { BRAND } from "./worker/transfer.js";

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

/** The patterns that share one literal text: a `*` pattern's prefix, or an exact text. Highest priority first. */
interface Group<T> {
  readonly text: string;
  readonly entries: Entry<T>[];
}

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** MurmurHash3's fmix32: a running FNV-1a state finished into a well spread hash. */
function finish(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h | 0;
}

/** FNV-1a of a whole text, finished: the hash GlobIndex.best reaches after reading that many characters. Exported for tests. */
export function hashOf(text: string): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME);
  return finish(h);
}

/**
 * Groups by their text's hash: open addressing with linear probing, at most half full, each
 * cell the hash and the group's number side by side in one Int32Array, so a probe that
 * finds nothing reads no object. Only a hash that matches reads the group and its text.
 */
export class GroupTable<T> {
  /** what this object is once copied to another thread (transfer.ts) */
  readonly [BRAND] = "GroupTable";
  readonly groups: Group<T>[] = [];
  /** cell c: [2c] the hash, [2c + 1] the group's number + 1 (0: empty) */
  private cells = new Int32Array(4);

  /** The group whose text is value's first `length` characters (hashing to `hash`), if any. */
  find(hash: number, length: number, value: string): Group<T> | undefined {
    const cells = this.cells;
    const mask = (cells.length >> 1) - 1;
    for (let c = hash & mask; ; c = (c + 1) & mask) {
      const slot = cells[2 * c + 1]!;
      if (slot === 0) return undefined;
      if (cells[2 * c] !== hash) continue;
      const group = this.groups[slot - 1]!;
      const text = group.text;
      if (text.length === length && (length === value.length ? text === value : value.startsWith(text))) return group;
    }
  }

  add(group: Group<T>): void {
    this.groups.push(group);
    if (this.groups.length * 4 > this.cells.length) {
      this.cells = new Int32Array(this.cells.length * 2);
      for (let slot = 0; slot < this.groups.length; slot++) this.place(slot);
    } else this.place(this.groups.length - 1);
  }

  private place(slot: number): void {
    const cells = this.cells;
    const mask = (cells.length >> 1) - 1;
    const hash = hashOf(this.groups[slot]!.text);
    let c = hash & mask;
    while (cells[2 * c + 1] !== 0) c = (c + 1) & mask;
    cells[2 * c] = hash;
    cells[2 * c + 1] = slot + 1;
  }
}

/** marks[n]: some `*` pattern's prefix is n characters long ... */
const STAR = 1;
/** ... some exact text is n characters long (it can only match a value of that length). */
const EXACT = 2;

/**
 * Patterns, exact texts included, by their literal text: `*` patterns grouped by their
 * prefix, exact texts by themselves, each kind in its own hash table. A lookup reads the
 * value's characters once, carrying an FNV-1a hash, and probes at the lengths some prefix
 * has (`marks`) and, at the end, for an exact text of the value's length: every group the
 * value can match is found, and only its patterns are tested. So 10,000 patterns cost one
 * pass over the value and a probe per prefix length in use, with no string built (a trie
 * with a Map per node cost a Map read per character; a Map of whole prefixes would cost a
 * slice per length). Patterns that start with `*` are tested on every lookup. The hash has
 * no seed: only the operator's patterns are inserted, so a caller's value can at most probe
 * the clusters those formed. Immutable once built.
 */
export class GlobIndex<T> {
  /** what this object is once copied to another thread (transfer.ts) */
  readonly [BRAND] = "GlobIndex";
  private readonly byText = new Map<string, Group<T>>();
  private readonly prefixes = new GroupTable<T>();
  private readonly exact = new GroupTable<T>();
  /** patterns that start with `*` (the empty prefix), tested on every lookup */
  private starFirst: Group<T> | undefined;
  /** by length: STAR | EXACT */
  private marks = new Uint8Array(1);
  /** a value is read no further than this, unless an exact text of its length is indexed */
  private longestPrefix = 0;
  /**
   * A bit per code unit below 256 that begins some `*` pattern's (non-empty) prefix, the
   * bit of 255 standing for every unit above: a value that begins with a unit no prefix
   * begins with probes no prefix, as a trie would have stopped at its root.
   */
  private readonly firstUnits = new Int32Array(8);
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(glob: Glob, priority: number, item: T, also?: Glob): void {
    const text = glob.prefix;
    // A `*` pattern and an exact text may share a text, never a group.
    const key = (glob.hasStar ? "*" : "=") + text;
    let group = this.byText.get(key);
    if (group === undefined) {
      group = { text, entries: [] };
      this.byText.set(key, group);
      if (glob.hasStar && text.length === 0) this.starFirst = group;
      else (glob.hasStar ? this.prefixes : this.exact).add(group);
      if (text.length >= this.marks.length) {
        const marks = new Uint8Array(text.length + 1);
        marks.set(this.marks);
        this.marks = marks;
      }
      this.marks[text.length]! |= glob.hasStar ? STAR : EXACT;
      if (glob.hasStar && text.length > 0) {
        if (text.length > this.longestPrefix) this.longestPrefix = text.length;
        const unit = Math.min(text.charCodeAt(0), 255);
        this.firstUnits[unit >> 5]! |= 1 << (unit & 31);
      }
    }
    // Highest priority first. Callers never give two patterns one value can match the same priority.
    const entries = group.entries;
    let at = entries.length;
    while (at > 0 && entries[at - 1]!.priority < priority) at--;
    entries.splice(at, 0, { glob, priority, item, also });
    this.count++;
  }

  /** Whether a pattern written as `source` (stars folded) is indexed already. */
  has(source: string): boolean {
    const star = source.indexOf("*");
    const group = this.byText.get(star < 0 ? "=" + source : "*" + source.slice(0, star));
    return group !== undefined && group.entries.some((entry) => entry.glob.source === source);
  }

  /**
   * The item of the highest-priority pattern that matches `value` (and whose `also`
   * pattern, if any, matches `alsoValue`); undefined when none does. Allocates nothing.
   */
  best(value: string, alsoValue = ""): T | undefined {
    let found = this.starFirst === undefined ? undefined : bestOf(this.starFirst.entries, value, alsoValue, undefined);
    const marks = this.marks;
    const n = value.length;
    const exactToo = n < marks.length && (marks[n]! & EXACT) !== 0;
    const unit = n === 0 ? 0 : Math.min(value.charCodeAt(0), 255);
    const prefixCan = (this.firstUnits[unit >> 5]! & (1 << (unit & 31))) !== 0;
    const end = exactToo ? n : prefixCan ? Math.min(n, this.longestPrefix) : 0;
    let h = FNV_OFFSET;
    for (let i = 0; i < end;) {
      h = Math.imul(h ^ value.charCodeAt(i), FNV_PRIME);
      if ((marks[++i]! & STAR) === 0 || !prefixCan) continue;
      const group = this.prefixes.find(finish(h), i, value);
      if (group !== undefined) found = bestOf(group.entries, value, alsoValue, found);
    }
    if (exactToo) {
      // find() compared the whole value with the group's text: its entries match on the value.
      const group = this.exact.find(finish(h), n, value);
      if (group !== undefined) found = bestOf(group.entries, undefined, alsoValue, found);
    }
    return found?.item;
  }
}

/**
 * The best of `found` and the first entry of `entries` (highest priority first) that
 * matches; `value` undefined: the entries' own pattern is known to match.
 */
function bestOf<T>(entries: readonly Entry<T>[], value: string | undefined, alsoValue: string, found: Entry<T> | undefined): Entry<T> | undefined {
  for (let k = 0; k < entries.length; k++) {
    const entry = entries[k]!;
    if (found !== undefined && entry.priority <= found.priority) return found;
    if (value !== undefined && !globMatches(entry.glob, value)) continue;
    if (entry.also !== undefined && !globMatches(entry.also, alsoValue)) continue;
    return entry;
  }
  return found;
}

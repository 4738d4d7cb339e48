import { isAlias, isMap, isScalar, isSeq, LineCounter, parseAllDocuments, visit, type Alias, type Document, type Node } from "yaml";
import { PolicyError } from "./errors.js";
import type { MetadataValue } from "./types.js";

/**
 * What a policy may hold, all files of POLICY_PATH together (docs/policy.md, Bounds). A
 * policy comes from files many people edit; each bound keeps a compile's time and memory
 * small whatever they write, and a refusal names the file and the bound.
 */
export const POLICY_BOUNDS = Object.freeze({
  /**
   * YAML nodes the compiler reads, each alias counted by what it expands to (a list of
   * 20,000 items aliased 999 times is 20 million): bounds an alias bomb by its effect.
   */
  expandedNodes: 500_000,
  /** `descriptors` entries of every domain, at every level */
  descriptors: 10_000,
  /** keys of one YAML mapping (a policy's own mappings have a dozen at most) */
  keysPerMap: 1_000,
  /** levels of nested `descriptors`: an RLS request's descriptor has at most 32 entries, so no deeper rule can match */
  depth: 32,
  /** `[` and `{` open at once in a file's text, checked before it is parsed */
  flowNesting: 256,
});

/**
 * The YAML nodes a compile may still read, shared by every document of every file of one
 * policy: each node is charged when the compiler reads it, an alias's target again each
 * time the alias is read, so what aliases expand to is counted, not how many there are.
 */
export class NodeBudget {
  left: number = POLICY_BOUNDS.expandedNodes;
  descriptors: number = POLICY_BOUNDS.descriptors;
}

/** A YAML node as the reader sees it: null for an absent or empty value. */
export type YamlNode = Node | null;

/**
 * Reads one YAML document of a policy file, refusing with a PolicyError that names the
 * file, the line and the problem. Scalars are read as envoyproxy/ratelimit reads them (YAML
 * 1.1, as its Go YAML library does): an unquoted integer, boolean or date where a string is
 * expected is taken as written (`value: 500` is "500"), a fraction is refused.
 */
export class YamlReader {
  constructor(
    readonly file: string,
    private readonly doc: Document,
    private readonly lines: LineCounter,
    /** each alias's node: found in one walk of the document (the library's resolve() walks the whole document per alias) */
    private readonly anchors: ReadonlyMap<Alias, Node | undefined>,
    readonly budget: NodeBudget,
  ) {}

  /** Charges `n` nodes read; refuses the policy past POLICY_BOUNDS.expandedNodes. */
  charge(node: YamlNode, n: number): void {
    // invariant: the nodes read by one compile, aliases expanded, never pass POLICY_BOUNDS.expandedNodes
    this.budget.left -= n;
    if (this.budget.left < 0) this.fail(node, `more than ${POLICY_BOUNDS.expandedNodes} YAML nodes once aliases are expanded (the bound of a policy)`);
  }

  /** The document's top-level node; null for an empty document (only comments). */
  get root(): YamlNode {
    const node = this.resolve(this.doc.contents as YamlNode);
    return isScalar(node) && node.value === null ? null : node;
  }

  fail(node: YamlNode, problem: string): never {
    const at = node?.range?.[0];
    throw new PolicyError(this.file, at === undefined ? problem : `line ${this.lines.linePos(at).line}: ${problem}`);
  }

  private resolve(node: YamlNode): YamlNode {
    if (!isAlias(node)) return node;
    const target = this.anchors.get(node);
    if (target === undefined) this.fail(node, `unknown alias *${node.source}`);
    // An anchor never points at an alias (YAML anchors a node), so this does not loop.
    return target as YamlNode;
  }

  /** A map's entries; every key a string and one of `allowed`. */
  map(raw: YamlNode, what: string, allowed: readonly string[]): Map<string, YamlNode> {
    const node = this.resolve(raw);
    if (!isMap(node)) this.fail(raw, `${what} must be a map`);
    if (node.items.length > POLICY_BOUNDS.keysPerMap) this.fail(node, `${what} has more than ${POLICY_BOUNDS.keysPerMap} keys (the bound of a policy)`);
    this.charge(node, node.items.length + 1);
    const out = new Map<string, YamlNode>();
    for (const pair of node.items) {
      const key = this.resolve(pair.key as YamlNode);
      if (!isScalar(key) || typeof key.value !== "string") {
        this.fail(key, `key is not a string: ${isScalar(key) ? (key.source ?? String(key.value)) : "a collection"}`);
      }
      if (!allowed.includes(key.value)) this.fail(key, `unknown key '${key.value}' in ${what}`);
      // Duplicate keys found here, in one pass (the parser's own check compares every pair).
      if (out.has(key.value)) this.fail(key, `map keys must be unique: '${key.value}' is given twice in ${what}`);
      out.set(key.value, pair.value as YamlNode);
    }
    return out;
  }

  /** A list's items; null (absent) is an empty list. */
  list(raw: YamlNode, what: string): YamlNode[] {
    const node = this.resolve(raw);
    if (node === null || (isScalar(node) && node.value === null)) return [];
    if (!isSeq(node)) this.fail(raw, `${what} must be a list`);
    this.charge(node, node.items.length + 1);
    return node.items as YamlNode[];
  }

  /** A string; undefined when absent or empty. */
  text(raw: YamlNode, what: string): string | undefined {
    const node = this.resolve(raw);
    if (node === null) return undefined;
    if (!isScalar(node)) this.fail(raw, `${what} must be a string, not a ${isSeq(node) ? "list" : "map"}`);
    const value = node.value;
    if (value === null) return undefined;
    if (typeof value === "string") return value === "" ? undefined : value;
    if (typeof value === "number" && !Number.isInteger(value)) this.fail(raw, `${what} must be a string, got ${node.source ?? value}`);
    return node.source ?? String(value);
  }

  /** An integer from min to max; undefined when absent. */
  int(raw: YamlNode, what: string, min: number, max: number): number | undefined {
    const node = this.resolve(raw);
    if (node === null || (isScalar(node) && node.value === null)) return undefined;
    const value = isScalar(node) ? node.value : undefined;
    if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
      this.fail(raw, `${what} must be an integer from ${min} to ${max}, got ${isScalar(node) ? (node.source ?? String(value)) : "a collection"}`);
    }
    return value;
  }

  /** true or false (YAML 1.1 spellings too: yes/no, on/off); undefined when absent. */
  bool(raw: YamlNode, what: string): boolean | undefined {
    const node = this.resolve(raw);
    if (node === null || (isScalar(node) && node.value === null)) return undefined;
    if (!isScalar(node) || typeof node.value !== "boolean") {
      this.fail(raw, `${what} must be true or false, got ${isScalar(node) ? (node.source ?? String(node.value)) : "a collection"}`);
    }
    return node.value;
  }

  /**
   * Any YAML value as plain data (a rule's `metadata`, whose keys are the author's), every
   * node charged, nested at most POLICY_BOUNDS.depth levels. A scalar that JSON cannot hold
   * (a date, an infinity) is kept as written.
   */
  plain(raw: YamlNode, what: string, depth = 1): MetadataValue {
    const node = this.resolve(raw);
    if (depth > POLICY_BOUNDS.depth) this.fail(raw, `${what} is nested over ${POLICY_BOUNDS.depth} levels deep (the bound of a policy)`);
    if (node === null) return null;
    if (isMap(node)) {
      if (node.items.length > POLICY_BOUNDS.keysPerMap) this.fail(node, `${what} has more than ${POLICY_BOUNDS.keysPerMap} keys (the bound of a policy)`);
      this.charge(node, node.items.length + 1);
      const out: Record<string, MetadataValue> = Object.create(null);
      for (const pair of node.items) {
        const key = this.resolve(pair.key as YamlNode);
        if (!isScalar(key) || key.value === null || typeof key.value === "object") this.fail(key, `a key of ${what} must be a string`);
        const name = typeof key.value === "string" ? key.value : (key.source ?? String(key.value));
        if (Object.hasOwn(out, name)) this.fail(key, `map keys must be unique: '${name}' is given twice in ${what}`);
        out[name] = this.plain(pair.value as YamlNode, what, depth + 1);
      }
      return out;
    }
    if (isSeq(node)) {
      this.charge(node, node.items.length + 1);
      return node.items.map((item) => this.plain(item as YamlNode, what, depth + 1));
    }
    if (!isScalar(node)) this.fail(raw, `${what} holds a value that is not data`);
    const value = node.value;
    if (value === null || typeof value === "string" || typeof value === "boolean") return value;
    if (typeof value === "number" && Number.isFinite(value)) return value;
    return node.source ?? String(value);
  }
}

/** Every document of a file (`---` separates them); bad YAML is refused with its line. */
export function readYamlDocuments(file: string, text: string, budget: NodeBudget = new NodeBudget()): YamlReader[] {
  const nesting = flowNesting(text);
  if (nesting > POLICY_BOUNDS.flowNesting) throw new PolicyError(file, `more than ${POLICY_BOUNDS.flowNesting} nested [ or { (the bound of a policy)`);
  const lines = new LineCounter();
  // uniqueKeys: false: the parser's check is quadratic in a map's keys; YamlReader.map() checks in one pass.
  const docs = parseAllDocuments(text, { version: "1.1", lineCounter: lines, uniqueKeys: false });
  // An empty text is an empty stream: no documents.
  const all = [...docs] as Document[];
  for (const doc of all) {
    const error = doc.errors[0];
    if (error !== undefined) throw new PolicyError(file, badYaml(error.linePos, error.message));
  }
  return all.map((doc) => new YamlReader(file, doc, lines, anchorsOf(doc), budget));
}

/** Each alias's node, as YAML defines it: the last node anchored with its name before it, in one walk. */
function anchorsOf(doc: Document): Map<Alias, Node | undefined> {
  const byName = new Map<string, Node>();
  const out = new Map<Alias, Node | undefined>();
  visit(doc, (_key, node) => {
    if (isAlias(node)) out.set(node, byName.get(node.source));
    else if ((isScalar(node) || isMap(node) || isSeq(node)) && node.anchor !== undefined) byName.set(node.anchor, node);
  });
  return out;
}

/**
 * The most `[` and `{` open at once outside comments, in one pass before the parser (whose
 * cost on deep nesting comes before any other check could run). Quotes are not followed: a
 * bracket inside one counts, so this may overestimate, never by a policy's real nesting;
 * a `]` inside quotes may hide nesting from it, which the parser's own depth limit and the
 * compile's budget (compile-worker.ts) then bound.
 */
function flowNesting(text: string): number {
  let depth = 0;
  let most = 0;
  let comment = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 10) comment = false;
    else if (comment) continue;
    else if (c === 35 /* # */ && (i === 0 || text.charCodeAt(i - 1) <= 32)) comment = true;
    else if (c === 91 || c === 123) most = Math.max(most, ++depth);
    else if ((c === 93 || c === 125) && depth > 0) depth--;
  }
  return most;
}

function badYaml(pos: readonly { line: number; col: number }[] | undefined, message: string): string {
  // The library's message ends its first line with the position and goes on with the source.
  const text = message.split("\n", 1)[0]!.replace(/ at line \d+, column \d+:?$/, "");
  return pos?.[0] === undefined ? `bad YAML: ${text}` : `bad YAML at line ${pos[0].line}, column ${pos[0].col}: ${text}`;
}

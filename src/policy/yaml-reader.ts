import { isAlias, isMap, isScalar, isSeq, LineCounter, parseAllDocuments, type Document, type Node } from "yaml";
import { PolicyError } from "./errors.js";

/** Aliases followed per document at most: bounds an alias bomb ("billion laughs"). */
const MAX_ALIASES = 1000;

/** A YAML node as the reader sees it: null for an absent or empty value. */
export type YamlNode = Node | null;

/**
 * Reads one YAML document of a policy file, refusing with a PolicyError that names the
 * file, the line and the problem. Scalars are read as envoyproxy/ratelimit reads them (YAML
 * 1.1, as its Go YAML library does): an unquoted integer, boolean or date where a string is
 * expected is taken as written (`value: 500` is "500"), a fraction is refused.
 */
export class YamlReader {
  private aliases = 0;
  constructor(
    readonly file: string,
    private readonly doc: Document,
    private readonly lines: LineCounter,
  ) {}

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
    if (++this.aliases > MAX_ALIASES) this.fail(node, `more than ${MAX_ALIASES} aliases`);
    const target = node.resolve(this.doc);
    if (target === undefined) this.fail(node, `unknown alias *${node.source}`);
    return this.resolve(target as YamlNode);
  }

  /** A map's entries; every key a string and one of `allowed`. */
  map(raw: YamlNode, what: string, allowed: readonly string[]): Map<string, YamlNode> {
    const node = this.resolve(raw);
    if (!isMap(node)) this.fail(raw, `${what} must be a map`);
    const out = new Map<string, YamlNode>();
    for (const pair of node.items) {
      const key = this.resolve(pair.key as YamlNode);
      if (!isScalar(key) || typeof key.value !== "string") {
        this.fail(key, `key is not a string: ${isScalar(key) ? (key.source ?? String(key.value)) : "a collection"}`);
      }
      if (!allowed.includes(key.value)) this.fail(key, `unknown key '${key.value}' in ${what}`);
      out.set(key.value, pair.value as YamlNode);
    }
    return out;
  }

  /** A list's items; null (absent) is an empty list. */
  list(raw: YamlNode, what: string): YamlNode[] {
    const node = this.resolve(raw);
    if (node === null || (isScalar(node) && node.value === null)) return [];
    if (!isSeq(node)) this.fail(raw, `${what} must be a list`);
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
}

/** Every document of a file (`---` separates them); bad YAML is refused with its line. */
export function readYamlDocuments(file: string, text: string): YamlReader[] {
  const lines = new LineCounter();
  const docs = parseAllDocuments(text, { version: "1.1", lineCounter: lines, uniqueKeys: true });
  // An empty text is an empty stream: no documents.
  const all = [...docs] as Document[];
  for (const doc of all) {
    const error = doc.errors[0];
    if (error !== undefined) throw new PolicyError(file, badYaml(error.linePos, error.message));
  }
  return all.map((doc) => new YamlReader(file, doc, lines));
}

function badYaml(pos: readonly { line: number; col: number }[] | undefined, message: string): string {
  // The library's message ends its first line with the position and goes on with the source.
  const text = message.split("\n", 1)[0]!.replace(/ at line \d+, column \d+:?$/, "");
  return pos?.[0] === undefined ? `bad YAML: ${text}` : `bad YAML at line ${pos[0].line}, column ${pos[0].col}: ${text}`;
}

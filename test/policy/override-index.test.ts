/**
 * Overrides: the most specific entry wins (exact identifier > wildcard identifier >
 * namespace alone; then exact namespace > wildcard; then more literal characters), over a
 * table of cases, and at scale: 10,000 entries answer like a scan of all of them would.
 */
import t from "tap";
import { compilePolicy } from "../../src/policy/index.js";
import { compileGlob, globMatches } from "../../src/policy/glob.js";
import { rankOf } from "../../src/policy/overrides.js";
import { prng } from "../harness/prng.js";

const file = (text: string) => [{ path: "/policy/o.yaml", name: "o.yaml", text }];

const POLICY = compilePolicy(
  file(`
overrides:
  - {namespace: checkout, identifier: user-1, limit: 1}         # 0
  - {namespace: "check*", identifier: user-1, limit: 2}         # 1
  - {namespace: "*", identifier: user-1, limit: 3}              # 2
  - {namespace: checkout, identifier: "user-*", limit: 4}       # 3
  - {namespace: checkout, identifier: "user-1*", limit: 5}      # 4
  - {namespace: "check*", identifier: "user-10*", limit: 6}     # 5
  - {namespace: "*", identifier: "vip-*", limit: 7}             # 6
  - {namespace: checkout, limit: 8}                             # 7
  - {namespace: "check*", limit: 9}                             # 8
  - {namespace: "*", limit: 10}                                 # 9
  - {namespace: "search.*", identifier: "bot-*", limit: 0}      # 10
  - {namespace: "search.*", shadow: true}                       # 11
  - {namespace: "search.web", limit: 12, duration: 60, algorithm: token-bucket}  # 12
`),
);

t.test("the most specific override wins", async (t) => {
  // [namespace, identifier, the winner's index in the file]
  const table: [string, string, number][] = [
    ["checkout", "user-1", 0], // exact both
    ["checkouts", "user-1", 1], // exact identifier, the longer wildcard namespace
    ["search", "user-1", 2], // exact identifier beats every wildcard identifier
    ["checkout", "user-2", 3], // a wildcard identifier under the exact namespace
    ["checkout", "user-15", 4], // user-1* has more literals than user-*
    ["checkout", "user-100", 5], // user-10* (8 literals) beats user-1* (7), even under a wildcard namespace
    ["billing", "vip-9", 6],
    ["checkout", "someone", 7], // the namespace alone: exact
    ["checkoutx", "someone", 8], // the longer wildcard namespace
    ["billing", "someone", 9],
    ["search.web", "bot-3", 10], // a wildcard identifier beats the namespace alone, exact or not
    ["search.web", "human", 12], // an exact namespace beats a wildcard one
    ["search.images", "human", 11],
  ];
  for (const [namespace, identifier, index] of table) {
    t.equal(POLICY.matchOverride(namespace, identifier)?.source, `o.yaml#${index}`, `${namespace} ${identifier}`);
  }
  t.same(POLICY.matchOverride("search.web", "human"), { limit: 12, duration: 60, algorithm: "token-bucket", shadow: false, source: "o.yaml#12" });
  t.same(POLICY.matchOverride("search.images", "human"), { limit: undefined, duration: undefined, algorithm: undefined, shadow: true, source: "o.yaml#11" });
  t.equal(POLICY.matchOverride("search.web", "bot-3")?.limit, 0, "limit 0: a deny list");
  t.equal(compilePolicy(file("overrides: [{namespace: a, limit: 1}]")).matchOverride("b", "x"), undefined, "no entry matches");
});

t.test("ties are refused; entries of different specificity are not ties", async (t) => {
  const refused = (text: string) => t.throws(() => compilePolicy(file(text)), { name: "PolicyError" }, text.replace(/\s+/g, " "));
  const accepted = (text: string) => t.doesNotThrow(() => compilePolicy(file(text)), text.replace(/\s+/g, " "));
  refused("overrides: [{namespace: a, limit: 1}, {namespace: a, limit: 2}]");
  refused("overrides: [{namespace: a, identifier: x, limit: 1}, {namespace: a, identifier: x, shadow: true}]");
  refused("overrides: [{namespace: 'a*', limit: 1}, {namespace: 'a**', limit: 2}]");
  refused("overrides: [{namespace: 'ab*', limit: 1}, {namespace: '*yz', limit: 2}]");
  refused("overrides: [{namespace: a, identifier: 'u*1', limit: 1}, {namespace: a, identifier: 'u1*', limit: 2}]");
  refused("overrides: [{namespace: 'a*', identifier: 'x*', limit: 1}, {namespace: '*a', identifier: '*x', limit: 2}]");
  accepted("overrides: [{namespace: 'ab*', limit: 1}, {namespace: 'cd*', limit: 2}]"); // disjoint
  accepted("overrides: [{namespace: 'ab*', limit: 1}, {namespace: '*z', limit: 2}]"); // 2 literals against 1
  accepted("overrides: [{namespace: 'a*', identifier: 'x*', limit: 1}, {namespace: '*b', identifier: '*y', limit: 2}]".replace("'*b'", "'b*'")); // namespaces disjoint
  accepted("overrides: [{namespace: a, identifier: x, limit: 1}, {namespace: a, identifier: 'x*', limit: 2}, {namespace: a, limit: 3}]");
  accepted("overrides: [{namespace: a, identifier: x, limit: 1}, {namespace: b, identifier: x, limit: 2}]");
});

t.test("10,000 entries answer as a scan of all of them would", async (t) => {
  const next = prng(3);
  const lines: string[] = [];
  const seen = new Set<string>();
  const pick = (n: number) => Math.floor(next() * n);
  while (lines.length < 10_000) {
    const kind = pick(6);
    const ns = kind < 2 ? `ns-${pick(200)}` : kind < 4 ? `ns-${pick(50)}*` : "*";
    const id = kind % 2 === 0 ? `user-${pick(5000)}` : `${"abcdefgh"[pick(8)]}-${pick(100)}*`;
    const key = `${ns}|${id}`;
    if (seen.has(key)) continue;
    seen.add(key);
    lines.push(`  - {namespace: "${ns}", identifier: "${id}", limit: ${lines.length}}`);
  }
  // Keep only entries that do not tie with an earlier one, as an operator would have to.
  const entries = lines.map((line) => {
    const [, ns, id] = /namespace: "([^"]*)", identifier: "([^"]*)"/.exec(line)!;
    return { line, ns: compileGlob(ns!), id: compileGlob(id!) };
  });
  let policy;
  let kept = entries;
  for (;;) {
    try {
      policy = compilePolicy(file("overrides:\n" + kept.map((e) => e.line).join("\n")));
      break;
    } catch (err) {
      const [, a] = /#(\d+)/.exec((err as Error).message)!.map(Number) as [number, number];
      kept = kept.filter((_, i) => i !== a);
    }
  }
  t.ok(kept.length > 9000, `${kept.length} entries kept`);
  const scan = (ns: string, id: string) => {
    let best: { index: number; rank: number } | undefined;
    kept.forEach((e, index) => {
      if (!globMatches(e.ns, ns) || !globMatches(e.id, id)) return;
      const rank = rankOf(e.ns, e.id);
      if (best === undefined || rank > best.rank) best = { index, rank };
    });
    return best === undefined ? undefined : `o.yaml#${best.index}`;
  };
  let matched = 0;
  for (let i = 0; i < 2000; i++) {
    const ns = `ns-${pick(250)}`;
    const id = pick(2) === 0 ? `user-${pick(6000)}` : `${"abcdefghij"[pick(10)]}-${pick(120)}`;
    const want = scan(ns, id);
    if (want !== undefined) matched++;
    if (policy.matchOverride(ns, id)?.source !== want) t.fail(`${ns} ${id}: want ${want}, got ${policy.matchOverride(ns, id)?.source}`);
  }
  t.ok(matched > 200, `${matched} of 2,000 lookups matched an entry`);
});

/** `*` as any run of characters, nothing else special: the reference reads patterns independently of glob.ts. */
const asRegExp = (pattern: string) =>
  new RegExp(
    "^" +
      pattern
        .split("*")
        .map((p) => p.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&"))
        .join(".*") +
      "$",
    "s",
  );

/**
 * The most specific entry by docs/policy.md's four steps, compared one by one: identifier
 * exact > wildcard > absent, its literal count, namespace exact > wildcard, its literal count.
 */
function referenceMatch(entries: readonly { ns: string; id: string | undefined }[], namespace: string, identifier: string): number | undefined {
  const literals = (p: string) => p.replace(/\*/g, "").length;
  const key = (e: { ns: string; id: string | undefined }) => [
    e.id === undefined ? 0 : e.id.includes("*") ? 1 : 2,
    e.id === undefined ? 0 : literals(e.id),
    e.ns.includes("*") ? 0 : 1,
    literals(e.ns),
  ];
  let best: number | undefined;
  entries.forEach((e, i) => {
    if (!asRegExp(e.ns).test(namespace) || (e.id !== undefined && !asRegExp(e.id).test(identifier))) return;
    if (best === undefined) return void (best = i);
    const [a, b] = [key(e), key(entries[best]!)];
    for (let k = 0; k < 4; k++) {
      if (a[k]! > b[k]!) return void (best = i);
      if (a[k]! < b[k]!) return;
    }
    throw new Error(`a tie reached the reference: #${best} and #${i}`);
  });
  return best;
}

t.test("random policies answer as the four steps of docs/policy.md say, with and without wildcard namespaces", async (t) => {
  const text = (next: () => number, alphabet: string, min: number, max: number) => {
    let s = "";
    const n = min + Math.floor(next() * (max - min + 1));
    for (let i = 0; i < n; i++) s += alphabet[Math.floor(next() * alphabet.length)];
    return s;
  };
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    const next = prng(100 + seed);
    const wildNamespaces = seed % 2 === 0;
    // Short texts over two letters, so that patterns overlap and most keys match several entries.
    let entries: { ns: string; id: string | undefined }[] = [];
    const seen = new Set<string>();
    while (entries.length < 120) {
      const ns = wildNamespaces && next() < 0.3 ? text(next, "ab*", 1, 3) : text(next, "ab", 1, 2);
      const r = next();
      const id = r < 0.15 ? undefined : r < 0.5 ? text(next, "ab", 1, 4) : text(next, "ab*", 1, 5);
      // `*` alone would match every key, and so would the namespaces alone over all of them: no lookup could miss.
      if (ns === "*" || id === "*" || (id === undefined && next() < 0.7)) continue;
      const k = `${ns}|${id}`;
      if (seen.has(k)) continue;
      seen.add(k);
      entries.push({ ns, id });
    }
    const yaml = (list: typeof entries) =>
      "overrides:\n" + list.map((e, i) => `  - {namespace: "${e.ns}"${e.id === undefined ? "" : `, identifier: "${e.id}"`}, limit: ${i + 1}}`).join("\n");
    // Drop the later entry of each tie until the policy loads, as an operator would have to.
    let policy;
    for (;;) {
      try {
        policy = compilePolicy(file(yaml(entries)));
        break;
      } catch (err) {
        const numbers = [...(err as Error).message.matchAll(/#(\d+)/g)].map((m) => Number(m[1]));
        entries = entries.filter((_, i) => i !== Math.max(...numbers));
      }
    }
    t.ok(entries.length > 30, `seed ${seed}: ${entries.length} entries kept`);
    let matched = 0;
    for (let i = 0; i < 4000; i++) {
      const namespace = text(next, "abc", 1, 3);
      const identifier = text(next, "abc", 1, 5);
      const want = referenceMatch(entries, namespace, identifier);
      const got = policy.matchOverride(namespace, identifier)?.source;
      if (got !== (want === undefined ? undefined : `o.yaml#${want}`)) t.fail(`seed ${seed}: ${namespace} ${identifier}: want #${want}, got ${got}`);
      if (want !== undefined) matched++;
    }
    t.ok(matched > 400 && matched < 3900, `seed ${seed}: ${matched} of 4,000 keys matched: both outcomes are exercised`);
  }
});

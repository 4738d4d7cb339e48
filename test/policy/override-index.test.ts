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

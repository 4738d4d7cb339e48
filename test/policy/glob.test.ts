/**
 * `*` patterns: matching against a regular expression over many random cases, and the
 * intersection check against brute force over every short string of a small alphabet.
 */
import t from "tap";
import { compileGlob, foldStars, GlobIndex, globMatches, globsIntersect } from "../../src/policy/glob.js";
import { prng } from "../harness/prng.js";

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

function randomText(next: () => number, alphabet: string, max: number): string {
  let s = "";
  const n = Math.floor(next() * (max + 1));
  for (let i = 0; i < n; i++) s += alphabet[Math.floor(next() * alphabet.length)];
  return s;
}

t.test("a pattern matches exactly what the regular expression with .* for * matches", async (t) => {
  const next = prng(7);
  let matched = 0;
  for (let i = 0; i < 20_000; i++) {
    const pattern = randomText(next, "ab*", 6);
    const value = randomText(next, "ab", 7);
    const want = asRegExp(pattern).test(value);
    if (globMatches(compileGlob(pattern), value) !== want) t.fail(`${pattern} vs ${value}: want ${want}`);
    if (want) matched++;
  }
  t.ok(matched > 2000, `${matched} of 20,000 random cases matched: both outcomes are exercised`);
});

t.test("folding stars, literal counts", async (t) => {
  t.equal(foldStars("a***b**"), "a*b*");
  t.match(compileGlob("svc*ep*rpc"), { prefix: "svc", suffix: "rpc", middle: ["ep"], literals: 8, hasStar: true });
  t.match(compileGlob("exact"), { prefix: "exact", suffix: "", hasStar: false, literals: 5 });
  t.ok(globMatches(compileGlob("*"), ""));
  t.notOk(globMatches(compileGlob("ab*ba"), "aba"), "prefix and suffix may not overlap");
});

t.test("two patterns intersect exactly when some string matches both", async (t) => {
  const strings: string[] = [""];
  for (let length = 1; length <= 6; length++) for (const s of strings.filter((x) => x.length === length - 1)) strings.push(s + "a", s + "b");
  const next = prng(11);
  let both = 0;
  for (let i = 0; i < 3000; i++) {
    const a = randomText(next, "ab*", 4);
    const b = randomText(next, "ab*", 4);
    const ra = asRegExp(a);
    const rb = asRegExp(b);
    // Patterns of at most 4 characters that share a string share one of at most 6 characters.
    const want = strings.some((s) => ra.test(s) && rb.test(s));
    if (globsIntersect(a, b) !== want) t.fail(`${a} ∩ ${b}: want ${want}`);
    if (want) both++;
  }
  t.ok(both > 300 && both < 2700, `${both} of 3,000 pairs intersect: both outcomes are exercised`);
  t.ok(globsIntersect("user-*", "*er-12"));
  t.notOk(globsIntersect("a*", "b*"));
  t.notOk(globsIntersect("*a", "*b"));
  t.ok(globsIntersect("a*b", "*"));
});

t.test("the index finds the highest-priority match and tests only prefix candidates", async (t) => {
  const index = new GlobIndex<string>();
  index.add(compileGlob("*"), 0, "anything");
  index.add(compileGlob("api/*"), 1, "api");
  index.add(compileGlob("api/v1/*"), 2, "v1");
  index.add(compileGlob("*.json"), 3, "json", compileGlob("checkout*"));
  t.equal(index.best("api/v1/users"), "v1");
  t.equal(index.best("api/v2"), "api");
  t.equal(index.best("other"), "anything");
  t.equal(index.best("api/v1/x.json", "checkout"), "json", "the second pattern matches too");
  t.equal(index.best("api/v1/x.json", "search"), "v1", "the second pattern does not");
  t.ok(index.has("api/*"));
  t.notOk(index.has("api/v2/*"));
  t.equal(index.size, 4);
  t.equal(new GlobIndex<string>().best("x"), undefined);
});

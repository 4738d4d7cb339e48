/**
 * `*` patterns: matching against a regular expression over many random cases, and the
 * intersection check against brute force over every short string of a small alphabet.
 */
import t from "tap";
import { compileGlob, foldStars, GlobIndex, globMatches, globsIntersect, hashOf } from "../../src/policy/glob.js";
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
  index.add(compileGlob("api/v1/users"), 4, "exact");
  t.equal(index.best("api/v1/users"), "exact", "an exact text is a pattern too");
  t.equal(index.best("api/v1/users2"), "v1", "and matches that text only");
  t.ok(index.has("api/v1/users"));
  t.notOk(index.has("api/v1/user"));
  // Prefixes that begin beyond Latin-1, and one at its last code unit.
  index.add(compileGlob("中文/*"), 5, "zh");
  index.add(compileGlob("ÿ/*"), 6, "y");
  t.equal(index.best("中文/x"), "zh");
  t.equal(index.best("ÿ/x"), "y");
  t.equal(index.best("日本/x"), "anything", "a unit beyond Latin-1 that begins no prefix");
});

/** The reference: every pattern tested, as a regular expression, the highest priority kept. */
function scanBest(entries: readonly { pattern: string; priority: number; also: string | undefined }[], value: string, alsoValue: string) {
  let best: { pattern: string; priority: number } | undefined;
  for (const e of entries) {
    if (!asRegExp(e.pattern).test(value) || (e.also !== undefined && !asRegExp(e.also).test(alsoValue))) continue;
    if (best === undefined || e.priority > best.priority) best = e;
  }
  return best?.pattern;
}

t.test("the index answers as a scan of every pattern would: random patterns, exact texts, shared prefixes", async (t) => {
  // Short patterns over a two-letter alphabet, so that prefixes nest and collide and most
  // values match several patterns; exact texts, `*` first, stars in the middle; a second
  // pattern on some. Priorities are distinct, as callers give them to patterns that can meet.
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const next = prng(seed);
    const index = new GlobIndex<string>();
    const entries: { pattern: string; priority: number; also: string | undefined }[] = [];
    const sources = new Set<string>();
    const count = seed <= 3 ? 40 : 400;
    for (let i = 0; entries.length < count && i < count * 20; i++) {
      const pattern = foldStars(randomText(next, next() < 0.3 ? "ab" : "ab*", seed <= 3 ? 5 : 9));
      const also = next() < 0.25 ? foldStars(randomText(next, "ab*", 3)) : undefined;
      // `*` alone would match every value: no lookup could miss.
      if (pattern === "*" || sources.has(pattern + "|" + also)) continue;
      sources.add(pattern + "|" + also);
      const priority = Math.floor(next() * 1e9);
      entries.push({ pattern, priority, also });
      index.add(compileGlob(pattern), priority, pattern, also === undefined ? undefined : compileGlob(also));
    }
    t.equal(index.size, entries.length);
    let matched = 0;
    for (let i = 0; i < 3000; i++) {
      const value = randomText(next, "abc", seed <= 3 ? 7 : 11);
      const alsoValue = randomText(next, "ab", 3);
      const want = scanBest(entries, value, alsoValue);
      const got = index.best(value, alsoValue);
      if (got !== want) t.fail(`seed ${seed}: best(${JSON.stringify(value)}, ${JSON.stringify(alsoValue)}) is ${got}, a scan says ${want}`);
      if (want !== undefined) matched++;
    }
    t.ok(matched > 300 && matched < 2900, `seed ${seed}: ${matched} of 3,000 values matched: both outcomes are exercised`);
    for (const e of entries) if (!index.has(e.pattern)) t.fail(`has(${e.pattern})`);
  }
});

t.test("thousands of patterns with long distinct prefixes: every one is found, nothing else is", async (t) => {
  const index = new GlobIndex<string>();
  const next = prng(17);
  const exact: string[] = [];
  const prefixed: string[] = [];
  for (let i = 0; i < 6000; i++) {
    const text = `${"xyz"[i % 3]}${i.toString(36)}-${Math.floor(next() * 1e6)}`;
    if (i % 2 === 0) {
      exact.push(text);
      index.add(compileGlob(text), 2, "=" + text);
    } else {
      prefixed.push(text);
      index.add(compileGlob(text + "*"), 1, "*" + text);
    }
  }
  for (const text of exact) {
    if (index.best(text) !== "=" + text) t.fail(`exact ${text}`);
    if (index.best(text + "!") !== undefined) t.fail(`exact ${text} matched ${text}!`);
    if (index.best(text.slice(0, -1)) !== undefined) t.fail(`${text.slice(0, -1)} matched`);
  }
  for (const text of prefixed) {
    if (index.best(text) !== "*" + text) t.fail(`prefix ${text}`);
    if (index.best(text + "tail\u00e9\u4e2d") !== "*" + text) t.fail(`prefix ${text} + tail`);
  }
  t.equal(index.best("é"), undefined);
  t.equal(index.best(""), undefined);
  t.pass(`${exact.length} exact texts and ${prefixed.length} prefixes checked`);
});

t.test("two texts whose hashes collide are told apart, as exact texts and as prefixes", async (t) => {
  // A birthday search: among 300,000 random texts of 12 letters, two 32-bit hashes meet (about 10 pairs expected).
  const byHash = new Map<number, string>();
  let pair: [string, string] | undefined;
  const next = prng(23);
  for (let i = 0; pair === undefined && i < 300_000; i++) {
    let text = "";
    for (let k = 0; k < 12; k++) text += String.fromCharCode(97 + Math.floor(next() * 26));
    const other = byHash.get(hashOf(text));
    if (other !== undefined && other !== text) pair = [other, text];
    else byHash.set(hashOf(text), text);
  }
  if (pair === undefined) return void t.fail("no two hashes collided");
  const [a, b] = pair;
  t.equal(hashOf(a), hashOf(b), `${a} and ${b} share a hash`);
  const one = new GlobIndex<string>();
  one.add(compileGlob(a), 1, "a");
  t.equal(one.best(b), undefined, "an exact text does not match another text of its hash");
  one.add(compileGlob(a + "*"), 0, "a*");
  t.equal(one.best(b + "-x"), undefined, "a prefix does not match a value starting with another text of its hash");
  const both = new GlobIndex<string>();
  for (const [text, name] of [
    [a, "a"],
    [b, "b"],
  ] as const) {
    both.add(compileGlob(text), 1, name);
    both.add(compileGlob(text + "*"), 0, name + "*");
  }
  t.equal(both.best(a), "a");
  t.equal(both.best(b), "b", "the probe goes on past a group of the same hash");
  t.equal(both.best(a + "-x"), "a*");
  t.equal(both.best(b + "-x"), "b*");
});

/**
 * The product slug (docs/api.md, Request body): NFKD, combining marks removed, lower-cased, runs of
 * characters outside [a-z0-9] become "-", leading/trailing "-" trimmed.
 */
import t from "tap";
import { prng } from "./harness/prng.js";
import { SlugCache, slugify } from "../src/decision.js";
import { show } from "./harness/contract.js";

t.test("slugify", async (t) => {
  const cases: [string, string][] = [
    ["Café Pro!", "cafe-pro"],
    ["\uFF21\uFF22\uFF23", "abc"], // fullwidth
    ["---", ""],
    ["", ""],
    ["pro", "pro"],
    ["PRO", "pro"],
    ["Pro Plan 2", "pro-plan-2"],
    ["  spaced  out  ", "spaced-out"],
    ["a--b__c..d", "a-b-c-d"],
    ["-a-", "a"],
    ["e\u0301", "e"], // already decomposed
    ["\u00e9", "e"], // precomposed
    ["Ångström", "angstrom"],
    ["naïve façade", "naive-facade"],
    ["\uFB01", "fi"], // ligature
    ["\u2460", "1"], // circled digit
    ["x\u00B2", "x2"], // superscript two
    ["\u2163", "iv"], // Roman numeral four
    ["İ", "i"],
    ["ß", ""], // no NFKD decomposition, not in [a-z0-9]
    ["straße", "stra-e"],
    ["Ω", ""],
    ["漢字", ""],
    ["😀 Plan", "plan"],
    ["a😀b", "a-b"],
    ["tab\tnew\nline", "tab-new-line"],
    ["\u0301\u0301a\u0301", "a"],
    ["0", "0"],
    ["Ｐｒｏ\u3000Ｐｌａｎ", "pro-plan"],
    ["lone\ud800surrogate", "lone-surrogate"],
  ];
  for (const [input, slug] of cases) t.equal(slugify(input), slug, `${show(input)} -> ${show(slug)}`);
});

t.test("slugs are always [a-z0-9] runs joined by single dashes", async (t) => {
  const rnd = prng(12345);
  const pool = ["a", "Z", "5", " ", "-", "_", "é", "e\u0301", "Ö", "ﬁ", "😀", "\u0000", "\ud800", "Ⅻ", "①", "ｱ", "!", "/", "."];
  for (let i = 0; i < 2000; i++) {
    let s = "";
    for (let n = Math.floor(rnd() * 20); n > 0; n--) s += pool[Math.floor(rnd() * pool.length)];
    const slug = slugify(s);
    if (!/^([a-z0-9]+(-[a-z0-9]+)*)?$/.test(slug)) t.fail(`${show(s)} -> ${show(slug)}`);
    if (slugify(slug) !== slug) t.fail(`not idempotent: ${show(s)}`);
  }
  t.pass("2000 random strings");
});

t.test("SlugCache gives slugify's answer, also past its size bound", async (t) => {
  const cache = new SlugCache();
  t.equal(cache.get("Café Pro!"), "cafe-pro");
  t.equal(cache.get("Café Pro!"), "cafe-pro", "cached");
  for (let i = 0; i < 25_000; i++) {
    const p = `Product ${i} É`;
    if (cache.get(p) !== slugify(p)) {
      t.fail(`wrong slug for ${p}`);
      break;
    }
  }
  t.equal(cache.get("Café Pro!"), "cafe-pro", "after the cache was cleared");
  t.equal(cache.get("---"), "");
});

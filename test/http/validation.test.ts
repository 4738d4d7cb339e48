/**
 * Field validation of POST /limit over a real listener: every bound of the spec's Limits
 * table at the edge and one past it, JSON types (integers only), lengths in UTF-16 code
 * units, the product slug rule, and the 400 body (`details` names each bad field and
 * never echoes the value sent).
 */
import t, { type Test as TapTest } from "tap";
import { limit, request, TEST_KEY, type Reply } from "../harness/http-client.js";
import { useTestNode } from "../harness/in-process-node.js";
import { envelopeProblems, leakProblems, show, uniqueId, validBody } from "../harness/contract.js";

const node = useTestNode(t);

type Test = TapTest;

/** A value no server text contains by accident: if it shows up in a response, it was echoed. */
const MARK = "Qz7xEchoCanary";

function ok200(t: Test, r: Reply, what: string): void {
  t.equal(r.status, 200, `${what}: 200 (${r.status === 200 ? "" : show(r.text)})`);
  if (r.status === 200) t.same(envelopeProblems(r, "rate_limit"), [], `${what}: envelope`);
}

/** 400 with the error envelope, `details` naming exactly `fields`, and nothing echoed. */
function bad400(t: Test, r: Reply, fields: string[], what: string, echoed: string[] = [MARK]): void {
  t.equal(r.status, 400, `${what}: 400 (${show(r.text.slice(0, 300))})`);
  t.same(envelopeProblems(r, "error"), [], `${what}: error envelope`);
  const d = r.json?.data;
  t.equal(d?.error, "Bad Request", `${what}: data.error`);
  t.equal(d?.status, 400);
  t.ok(Array.isArray(d?.details) && d.details.length > 0, `${what}: details is a non-empty array`);
  if (!Array.isArray(d?.details)) return;
  for (const p of d.details) {
    t.same(Object.keys(p).sort(), ["field", "message"], `${what}: detail shape`);
    t.type(p.message, "string");
    t.ok(p.message.length > 0);
  }
  t.same(d.details.map((p: { field: string }) => p.field).sort(), [...fields].sort(), `${what}: fields named`);
  for (const e of echoed) if (e !== "") t.notOk(r.text.includes(e), `${what}: value not echoed`);
  t.same(leakProblems(r.text), [], `${what}: no internals`);
}

const ask = (body: unknown) => limit(node.url, body);

t.test("string lengths at the edge and one past", async (t) => {
  const cases: [field: "namespace" | "product" | "identifier", min: number, max: number][] = [
    ["namespace", 1, 256],
    ["product", 1, 128],
    ["identifier", 1, 512],
  ];
  for (const [field, min, max] of cases) {
    const fill = (n: number) => (MARK + "a".repeat(max + 10)).slice(0, n);
    // identifiers must stay unique per run: vary the tail, keep the length
    const uniq = (n: number) => (n <= 12 ? "b".repeat(n) : fill(n - 12) + uniqueId("").slice(-12).padStart(12, "0"));
    for (const n of [min, max]) {
      const value = field === "identifier" ? uniq(n) : fill(n);
      t.equal(value.length, n);
      const r = await ask(validBody({ [field]: value }));
      ok200(t, r, `${field} length ${n}`);
      if (field === "identifier") t.equal(r.json?.data?.identifier, value);
      if (field === "namespace") t.equal(r.json?.data?.namespace, value);
      if (field === "product") t.equal(r.json?.data?.namespace, "contract." + value.toLowerCase());
    }
    bad400(t, await ask(validBody({ [field]: "" })), [field], `${field} length 0`);
    const over = fill(max + 1);
    t.equal(over.length, max + 1);
    bad400(t, await ask(validBody({ [field]: over })), [field], `${field} length ${max + 1}`, [over, MARK]);
  }
});

t.test("integer bounds at the edge and one past", async (t) => {
  const cases: [field: "limit" | "duration", min: number, max: number][] = [
    ["limit", 1, 1_000_000],
    ["duration", 1, 31_536_000],
  ];
  for (const [field, min, max] of cases) {
    for (const v of [min, max]) {
      const r = await ask(validBody({ [field]: v }));
      ok200(t, r, `${field} = ${v}`);
      if (field === "limit") {
        t.equal(r.json?.data?.limit, v);
        t.equal(r.json?.data?.remaining, v - 1);
      } else {
        t.equal(r.headers["ratelimit-policy"], `"fixed-window";q=10;w=${v}`);
      }
    }
    for (const v of [min - 1, max + 1, -1, -max, 2 ** 32, 2 ** 53, Number.MAX_SAFE_INTEGER + 2]) {
      bad400(
        t,
        await ask(validBody({ [field]: v })),
        [field],
        `${field} = ${v}`,
        [String(v)].filter((s) => s.length > 2),
      );
    }
  }
});

t.test("limit and duration: JSON integers only", async (t) => {
  for (const field of ["limit", "duration"]) {
    const wrong: [string, unknown][] = [
      ['"10"', "10"],
      ["10.5", 10.5],
      ["1.0000001", 1.0000001],
      ["true", true],
      ["false", false],
      ["null", null],
      ["[10]", [10]],
      ['{"n":10}', { n: 10 }],
      ["string mark", MARK],
    ];
    for (const [label, value] of wrong) bad400(t, await ask(validBody({ [field]: value })), [field], `${field} = ${label}`);
    const missing = validBody();
    delete missing[field];
    const r = await ask(missing);
    bad400(t, r, [field], `${field} missing`);
    t.match(r.json?.data?.details?.[0]?.message, /required/, `${field} missing says required`);
    // JSON text a client might write by hand: -0 and a negative exponent are not integers ≥ 1
    const text = JSON.stringify(validBody()).replace(new RegExp(`"${field}":\\d+`), `"${field}":-0`);
    bad400(t, await ask(text), [field], `${field} = -0`);
    const text2 = JSON.stringify(validBody()).replace(new RegExp(`"${field}":\\d+`), `"${field}":5e-1`);
    bad400(t, await ask(text2), [field], `${field} = 5e-1`);
  }
});

t.test("string fields: wrong types and missing", async (t) => {
  for (const field of ["namespace", "identifier", "product", "algorithm"]) {
    for (const value of [123, true, null, [MARK], { v: MARK }]) {
      bad400(t, await ask(validBody({ [field]: value })), [field], `${field} = ${show(value)}`);
    }
  }
  for (const field of ["namespace", "identifier"]) {
    const body = validBody();
    delete body[field];
    const r = await ask(body);
    bad400(t, r, [field], `${field} missing`);
    t.match(r.json?.data?.details?.[0]?.message, /required/);
  }
});

t.test("algorithm: only the four names, exactly", async (t) => {
  for (const value of ["FIXED-WINDOW", "fixed_window", "fixedwindow", " fixed-window", "gcra", "", MARK]) {
    bad400(t, await ask(validBody({ algorithm: value })), ["algorithm"], `algorithm ${show(value)}`);
  }
});

t.test("every bad field is named; good ones are not", async (t) => {
  const r = await ask({ namespace: "", identifier: MARK.repeat(60), limit: "5", duration: 0, algorithm: MARK, product: MARK.repeat(20) });
  bad400(t, r, ["namespace", "identifier", "limit", "duration", "algorithm", "product"], "six bad fields", [MARK]);
  const r2 = await ask({ namespace: "ok", identifier: "fine", limit: 0 });
  bad400(t, r2, ["limit", "duration"], "bad limit and missing duration");
  const r3 = await ask({});
  bad400(t, r3, ["namespace", "identifier", "limit", "duration"], "empty object");
  for (const p of r3.json.data.details) t.match(p.message, /required/);
});

t.test("lengths are UTF-16 code units", async (t) => {
  const e = "\u00e9"; // é, precomposed: 1 code unit, 2 UTF-8 bytes
  ok200(t, await ask(validBody({ namespace: e.repeat(256) })), "256 × é");
  bad400(t, await ask(validBody({ namespace: e.repeat(257) })), ["namespace"], "257 × é", [e.repeat(257)]);
  const emoji = "\u{1F600}"; // 2 code units
  const r = await ask(validBody({ namespace: emoji.repeat(128) }));
  ok200(t, r, "128 emoji = 256 units");
  t.equal(r.json?.data?.namespace, emoji.repeat(128));
  bad400(t, await ask(validBody({ namespace: "a" + emoji.repeat(128) })), ["namespace"], "a + 128 emoji = 257 units");
  // the UTF-8 byte length (1024) is far over 256, yet it is fine
  ok200(t, await ask(validBody({ namespace: "\u{10FFFF}".repeat(128) })), "128 × U+10FFFF");
  const id = uniqueId("e").slice(0, 12);
  ok200(t, await ask(validBody({ identifier: id + emoji.repeat(250) })), "identifier 12 + 500 units");
  bad400(t, await ask(validBody({ identifier: id + "x" + emoji.repeat(250) })), ["identifier"], "identifier 513 units");
  // decomposed é (e + U+0301) counts 2
  ok200(t, await ask(validBody({ product: "e\u0301".repeat(64) })), "product 64 × decomposed é = 128 units");
  bad400(t, await ask(validBody({ product: "e\u0301".repeat(64) + "x" })), ["product"], "product 129 units");
  const p = await ask(validBody({ product: "x" + emoji.repeat(64) }));
  bad400(t, p, ["product"], "product 1 + 64 emoji = 129 units");
  t.match(p.json?.data?.details?.[0]?.message, /128/, "the length rule, not the slug rule");
});

t.test("product slug rule", async (t) => {
  const cases: [product: string, slug: string][] = [
    ["Café Pro!", "cafe-pro"],
    ["\uFF21\uFF22\uFF23", "abc"], // fullwidth ＡＢＣ
    ["pro", "pro"],
    ["  Hello   World  ", "hello-world"],
    ["--a--b--", "a-b"],
    ["Ünïcödé Plan", "unicode-plan"],
    ["e\u0301", "e"], // decomposed input
    ["\uFB01le", "file"], // ﬁ ligature
    ["\u2460\u2461", "12"], // circled digits
    ["İstanbul", "istanbul"],
    ["v1.2_beta", "v1-2-beta"],
    ["A😀B", "a-b"],
    ["X".repeat(128), "x".repeat(128)],
    ["Ｐｒｏ　Ｐｌａｎ", "pro-plan"], // fullwidth letters and ideographic space
  ];
  for (const [product, slug] of cases) {
    const r = await ask(validBody({ namespace: "ns", product }));
    ok200(t, r, `product ${show(product)}`);
    t.equal(r.json?.data?.namespace, "ns." + slug, `${show(product)} -> ${slug}`);
  }
  for (const product of ["---", " ", "!!!", "😀", "漢字", "Ω", "\u0301", "-_-"]) {
    const r = await ask(validBody({ product }));
    bad400(t, r, ["product"], `product ${show(product)} has an empty slug`, []);
  }
  // no product: no dot appended
  const r = await ask(validBody({ namespace: "plain" }));
  t.equal(r.json?.data?.namespace, "plain");
});

t.test("invalid JSON and non-object bodies are 400", async (t) => {
  const texts = ["", " ", "{", "{}}", "{'namespace':'a'}", '{"namespace":"a",}', "nul", "undefined", "NaN", `{"namespace":"${MARK}"`, "[", '{"a":1 "b":2}'];
  for (const text of texts) {
    const r = await ask(text);
    bad400(t, r, ["body"], `body ${JSON.stringify(text)}`);
    t.match(r.json?.data?.details?.[0]?.message, /JSON/);
  }
  for (const text of ["[]", '"string"', "42", "null", "true", `["${MARK}"]`, "[{}]"]) {
    const r = await ask(text);
    bad400(t, r, ["body"], `non-object ${text}`);
  }
});

t.test("a request with no body at all is 400", async (t) => {
  const r = await request(node.url + "/limit", {
    method: "POST",
    headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json", "content-length": "0" },
  });
  bad400(t, r, ["body"], "empty body");
});

t.test("valid after invalid: validation leaves no state behind", async (t) => {
  const body = validBody({ limit: 1 });
  bad400(t, await ask({ ...body, limit: 0 }), ["limit"], "bad limit");
  bad400(t, await ask({ ...body, duration: "60" }), ["duration"], "bad duration");
  const r = await ask(body);
  ok200(t, r, "first valid request");
  t.equal(r.json.data.count, 1, "rejected requests were not counted");
});

t.test("bodies that are not UTF-8 are 400, so distinct byte strings never share a limit", async (t) => {
  const mk = (bytes: number[]) =>
    Buffer.concat([Buffer.from(`{"namespace":"utf8","limit":1,"duration":600,"identifier":"${uniqueId()}`), Buffer.from(bytes), Buffer.from('"}')]);
  const headers = { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" };
  for (const bytes of [
    [0xff],
    [0xfe],
    [0xc3],
    [0xed, 0xa0, 0x80] /* UTF-8-encoded lone surrogate */,
    [0xc0, 0xaf] /* overlong "/" */,
    [0xf4, 0x90, 0x80, 0x80] /* above U+10FFFF */,
  ]) {
    const r = await request(node.url + "/limit", { method: "POST", headers, body: mk(bytes) });
    bad400(t, r, ["body"], `bytes ${Buffer.from(bytes).toString("hex")}`);
  }
  // well-formed multi-byte UTF-8 is of course fine
  const r = await request(node.url + "/limit", { method: "POST", headers, body: mk([0xc3, 0xa9, 0xf0, 0x9f, 0x98, 0x80]) });
  ok200(t, r, "é😀 in UTF-8");
  t.match(r.json?.data?.identifier, /é😀$/);
});

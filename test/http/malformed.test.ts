/**
 * Bad input over a real listener: well over 1,000 generated malformed bodies (seeded, so a
 * failure reproduces with MALFORMED_SEED=<seed>), sent 50 at a time. Every answer must be
 * an enveloped 4xx JSON error with the right status, no stack trace or path may leak,
 * nothing may hang, and the node must still serve a valid request afterwards.
 */
import t from "tap";
import { request, TEST_KEY, type Reply } from "../harness/http-client.js";
import { useTestNode } from "../harness/in-process-node.js";
import { envelopeProblems, leakProblems, pool, show, uniqueId, validBody } from "../harness/contract.js";
import { prng } from "../harness/prng.js";

const SEED = process.env.MALFORMED_SEED !== undefined ? Number(process.env.MALFORMED_SEED) >>> 0 : (Math.random() * 2 ** 32) >>> 0;
t.comment(`malformed-body seed: ${SEED} (rerun with MALFORMED_SEED=${SEED})`);

const rand = prng(SEED);
const int = (n: number) => Math.floor(rand() * n);
const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;

interface Case {
  kind: string;
  desc: string;
  body: Buffer;
  /** statuses that are right for this case */
  expect: number[];
  contentType?: string;
}

const MAX = 16 * 1024;
const cases: Case[] = [];
function add(kind: string, desc: string, body: string | Buffer, expect?: number[], contentType?: string): void {
  const buf = typeof body === "string" ? Buffer.from(body, "utf8") : body;
  const exp = expect ?? (buf.length > MAX ? [413] : [400]);
  cases.push({ kind, desc, body: buf, expect: exp, ...(contentType !== undefined ? { contentType } : {}) });
}

const FIELDS = ["namespace", "product", "identifier", "limit", "duration", "algorithm"] as const;
const base = () => ({ namespace: "fuzz", product: "Fuzz Pro", identifier: uniqueId("f"), limit: 1000, duration: 3600, algorithm: "sliding-window" });

// 1. random bytes
for (let i = 0; i < 250; i++) {
  const n = int(4) === 0 ? int(MAX + 200) : int(300);
  const bytes = Buffer.alloc(n);
  for (let j = 0; j < n; j++) bytes[j] = int(256);
  // A random byte string could in theory be a valid body; it never is in practice, but be exact:
  if (bytes.length > 0 && bytes[0] === 0x7b) bytes[0] = 0x5b; // never starts an object: "{" → "["
  add("random-bytes", `${n} random bytes`, bytes);
}
// random printable ASCII, JSON-ish alphabet
const ALPHABET = '{}[]":,0123456789.eE+-truefalsnl \\abcxyz\t\n';
for (let i = 0; i < 150; i++) {
  let s = "";
  const n = 1 + int(200);
  for (let j = 0; j < n; j++) s += pick([...ALPHABET]);
  if (s.trimStart().startsWith("{")) s = "[" + s; // an object could be valid; keep every case malformed
  add("random-text", show(s.slice(0, 40)), s);
}

// 2. truncated valid JSON at every cut point
for (const full of [
  JSON.stringify(base()),
  JSON.stringify({ ...base(), extra: { a: [1, 2, { b: null }] } }),
  JSON.stringify({ ...base(), identifier: 'é😀\u0000"\\' }),
]) {
  for (let cut = 0; cut < full.length; cut++) add("truncated", `cut at ${cut}/${full.length}`, full.slice(0, cut));
  // and byte-wise cuts inside multi-byte characters
  const bytes = Buffer.from(full);
  for (let cut = 1; cut < bytes.length; cut += 7) add("truncated-bytes", `byte cut ${cut}/${bytes.length}`, bytes.subarray(0, cut));
}

// 3. wrong types and out-of-range values for each field
const WRONG: Record<(typeof FIELDS)[number], unknown[]> = {
  namespace: [null, 0, 1, true, false, [], {}, ["a"], { a: 1 }, "", "x".repeat(257), -1, 1.5],
  product: [null, 0, true, [], {}, "", "x".repeat(129), "---", "😀", " ", 7],
  identifier: [null, 0, true, [], {}, "", "x".repeat(513), 1e21, { toString: "x" }],
  limit: [null, "10", "", "1e3", 10.5, 0, -1, 1000001, 2 ** 32, 2 ** 53, true, [], {}, [10], 0.1, -0.5, 1e-7],
  duration: [null, "60", 60.5, 0, -60, 31536001, 4294967296, true, false, [], {}, [60], "1h", "PT1H"],
  algorithm: [null, 0, true, [], {}, "", "Fixed-Window", "fixed window", "token_bucket", "gcra", "fixed-window\u0000", "sliding-window ", 3],
};
for (const field of FIELDS) {
  for (const value of WRONG[field]) add("wrong-type", `${field}=${JSON.stringify(value)?.slice(0, 30)}`, JSON.stringify({ ...base(), [field]: value }));
  const missing: Record<string, unknown> = base();
  delete missing[field];
  // product and algorithm are optional: a body without them is valid, so make another field bad
  if (field === "product" || field === "algorithm") missing.limit = 0;
  add("missing", `${field} missing`, JSON.stringify(missing));
}
// pairs of bad fields, chosen at random
for (let i = 0; i < 120; i++) {
  const b: Record<string, unknown> = base();
  const f1 = pick(FIELDS);
  const f2 = pick(FIELDS);
  b[f1] = pick(WRONG[f1]);
  b[f2] = pick(WRONG[f2]);
  add("wrong-pair", `${f1}, ${f2}`, JSON.stringify(b));
}

// 4. deep nesting
for (const depth of [100, 1000, 5000, 8000, 8191]) {
  add("deep", `array depth ${depth}`, "[".repeat(depth) + "]".repeat(depth));
  add("deep", `unclosed array depth ${depth}`, "[".repeat(depth));
  const obj = '{"a":'.repeat(Math.floor(depth / 3)) + "1" + "}".repeat(Math.floor(depth / 3));
  add("deep", `object depth ${Math.floor(depth / 3)}`, obj);
  add(
    "deep",
    `deep value in limit, depth ${Math.floor(depth / 3)}`,
    `{"namespace":"n","identifier":"i","duration":60,"limit":${"[".repeat(Math.floor(depth / 3))}${"]".repeat(Math.floor(depth / 3))}}`,
  );
}
add("deep", "array depth 10000 (over 16 KiB)", "[".repeat(10000) + "]".repeat(10000));
add("deep", "object depth 10000 (over 16 KiB)", '{"a":'.repeat(10000) + "1" + "}".repeat(10000));
add("deep", "unclosed depth 20000", "{".repeat(20000));

// 5. huge and odd numbers, written as JSON text
const NUMBERS = [
  "1e400",
  "-1e400",
  "1e309",
  "-0",
  "0e0",
  "1e-400",
  "NaN",
  "Infinity",
  "-Infinity",
  "0x10",
  "010",
  "+5",
  ".5",
  "5.",
  "1_000",
  "9".repeat(400),
  "1" + "0".repeat(20),
  "1.7976931348623157e309",
  "4294967297",
  "-2147483649",
];
for (const n of NUMBERS) {
  for (const field of ["limit", "duration"]) {
    add("number", `${field}: ${n.slice(0, 20)}`, JSON.stringify(base()).replace(new RegExp(`"${field}":\\d+`), `"${field}":${n}`));
  }
}

// 6. JSON that is not an object
for (const text of [
  "null",
  "true",
  "false",
  "0",
  "-1",
  "1e400",
  '""',
  '"{}"',
  JSON.stringify(JSON.stringify(base())),
  "[]",
  "[{}]",
  JSON.stringify([base()]),
  "[null]",
  '[1,"a",{}]',
]) {
  add("non-object", text.slice(0, 40), text);
}

// 7. lone surrogates (as escapes: valid JSON text) next to a bad field; invalid UTF-8 bytes in strings
for (const esc of ["\\ud800", "\\udfff", "\\udc00\\ud800", "\\ud83d", "a\\ud800b"]) {
  for (const field of ["namespace", "identifier", "product"]) {
    const text = JSON.stringify({ ...base(), limit: 0 }).replace(new RegExp(`"${field}":"`), `"${field}":"${esc}`);
    add("surrogate", `${field} ${esc}, bad limit`, text);
  }
}
const BAD_UTF8 = [
  [0xff],
  [0xfe],
  [0x80],
  [0xc3],
  [0xc3, 0x28],
  [0xe2, 0x82],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xc0, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
];
for (const bytes of BAD_UTF8) {
  for (const field of ["namespace", "identifier", "product", "algorithm"]) {
    const [before, after] = JSON.stringify(base()).split(new RegExp(`(?<="${field}":")`)) as [string, string];
    // valid otherwise: the bytes alone must make it a 400
    add("bad-utf8", `${field} + ${Buffer.from(bytes).toString("hex")}`, Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)]));
  }
  add("bad-utf8", `key bytes ${Buffer.from(bytes).toString("hex")}`, Buffer.concat([Buffer.from('{"'), Buffer.from(bytes), Buffer.from('":1}')]));
}
// raw control characters inside strings are not JSON
for (const c of [0x00, 0x01, 0x0a, 0x0d, 0x09, 0x1f]) {
  add("control-char", `raw 0x${c.toString(16)} in identifier`, JSON.stringify(base()).replace('"identifier":"', `"identifier":"${String.fromCharCode(c)}`));
}

// 8. duplicate keys (the last one wins in JSON.parse: make it the bad one)
for (const field of FIELDS) {
  for (const bad of WRONG[field].slice(0, 4)) {
    const text = JSON.stringify(base()).slice(0, -1) + `,"${field}":${JSON.stringify(bad)}}`;
    add("duplicate", `${field} twice, last ${JSON.stringify(bad)}`, text);
  }
}

// 9. prototype keys: a field smuggled through __proto__ or constructor must not count
for (const field of ["limit", "duration", "namespace", "identifier"] as const) {
  const b: Record<string, unknown> = base();
  const value = b[field];
  delete b[field];
  const rest = JSON.stringify(b).slice(1, -1);
  add("proto", `${field} via __proto__`, `{"__proto__":{"${field}":${JSON.stringify(value)}},${rest}}`);
  add("proto", `${field} via constructor.prototype`, `{"constructor":{"prototype":{"${field}":${JSON.stringify(value)}}},${rest}}`);
  add("proto", `${field} via prototype`, `{"prototype":{"${field}":${JSON.stringify(value)}},${rest}}`);
}
add("proto", "__proto__ only", '{"__proto__":{"namespace":"n","identifier":"i","limit":5,"duration":60}}');
add("proto", "__proto__ null", '{"__proto__":null}');
add("proto", "__proto__ array", `{"__proto__":[${JSON.stringify(base())}]}`);
add(
  "proto",
  "constructor string and bad limit",
  JSON.stringify({ ...base(), constructor: "Object", toString: 1, valueOf: null, hasOwnProperty: 0, limit: "x" }),
);

// 10. strings over the limits, some far over (and over the body cap)
for (let i = 0; i < 40; i++) {
  const field = pick(["namespace", "product", "identifier"] as const);
  const max = field === "namespace" ? 256 : field === "product" ? 128 : 512;
  const n = max + 1 + (int(2) === 0 ? int(10) : int(MAX + 2000));
  add("long", `${field} length ${n}`, JSON.stringify({ ...base(), [field]: pick(["x", "é", "😀", "\\", '"']).repeat(n) }));
}
for (const size of [MAX + 1, MAX + 2, 2 * MAX, 64 * 1024, 256 * 1024]) {
  add(
    "oversize",
    `valid body padded to ${size} bytes`,
    JSON.stringify({ ...base(), pad: "p".repeat(size) })
      .slice(0, size)
      .padEnd(size, " "),
    [413],
  );
}

// 11. random JSON trees that are objects but never valid (duration is always absent or wrong)
function randomJson(depth: number): unknown {
  switch (int(depth > 3 ? 5 : 8)) {
    case 0:
      return null;
    case 1:
      return rand() < 0.5;
    case 2:
      return pick([0, -1, 1, 1.5, 1e6, 1e7, 2 ** 31, -(2 ** 31), 1e-3]);
    case 3:
      return pick(["", "a", "fixed-window", "token-bucket", "😀", "\u0000", "x".repeat(300), "svc_sk_x", "__proto__"]);
    case 4:
      return int(1000);
    case 5:
      return Array.from({ length: int(4) }, () => randomJson(depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let k = int(6); k > 0; k--) o[pick([...FIELDS, "x", "data", "_request", "__proto__", "constructor"])] = randomJson(depth + 1);
      return o;
    }
  }
}
for (let i = 0; i < 150; i++) {
  const o: Record<string, unknown> = {};
  for (const f of FIELDS) if (rand() < 0.7) o[f] = rand() < 0.5 ? randomJson(1) : base()[f];
  if (rand() < 0.5) delete o.duration;
  else o.duration = pick([null, "60", 0, 60.5, [], {}, -1, 31536001]);
  add("random-json", JSON.stringify(o).slice(0, 60), JSON.stringify(o));
}

// 12. header-level: wrong content type whatever the body (415 before any parsing)
for (let i = 0; i < 30; i++) {
  const c = cases[int(cases.length)]!;
  const ct = pick([
    "text/plain",
    "application/x-www-form-urlencoded",
    "application/jsonx",
    "json",
    "",
    "application/json-patch+json",
    "multipart/form-data; boundary=x",
  ]);
  cases.push({ kind: "content-type", desc: `${JSON.stringify(ct)} with ${c.kind}`, body: c.body, expect: [415], contentType: ct });
}

const node = useTestNode(t);

t.test(`${cases.length} malformed bodies, 50 at a time`, async (t) => {
  t.ok(cases.length >= 1000, `at least 1,000 cases (${cases.length})`);
  t.comment(`${cases.length} cases; seed ${SEED}`);
  const failures: string[] = [];
  const statuses = new Map<number, number>();
  const started = Date.now();
  await pool(cases, 50, async (c, i) => {
    const headers: Record<string, string> = { authorization: `Bearer ${TEST_KEY}` };
    if (c.contentType !== "") headers["content-type"] = c.contentType ?? "application/json";
    let r: Reply;
    try {
      r = await request(node.url + "/limit", { method: "POST", headers, body: c.body, timeoutMs: 10_000 });
    } catch (err) {
      // A 413 may close the connection before the whole body was written: the answer must still have come first.
      failures.push(`#${i} ${c.kind} ${c.desc}: ${(err as Error).message}`);
      return;
    }
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    const problems = [
      ...(c.expect.includes(r.status) ? [] : [`status ${r.status}, expected ${c.expect.join("|")}`]),
      ...envelopeProblems(r, "error"),
      ...leakProblems(r.text),
    ];
    if (r.json?.data?.status !== undefined && r.json.data.status !== r.status) problems.push("data.status differs");
    if (problems.length > 0) failures.push(`#${i} ${c.kind} ${c.desc}: ${problems.join("; ")} — ${r.text.slice(0, 160)}`);
  });
  t.comment(`statuses: ${JSON.stringify(Object.fromEntries(statuses))} in ${Date.now() - started} ms`);
  t.same(
    failures.slice(0, 25).map((f) => show(f)),
    [],
    `every answer an enveloped 4xx (seed ${SEED}; ${failures.length} failures)`,
  );
  t.equal(failures.length, 0);
  const kinds = new Set(cases.map((c) => c.kind));
  t.ok(kinds.size >= 15, `covers ${kinds.size} kinds`);
});

t.test("nothing leaked into shared prototypes", async (t) => {
  const probe = {} as Record<string, unknown>;
  for (const f of ["limit", "duration", "namespace", "identifier", "prototype"]) t.equal(probe[f], undefined, `Object.prototype.${f}`);
});

t.test("the node still serves afterwards", async (t) => {
  const body = validBody({ limit: 2 });
  const headers = { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" };
  const a = await request(node.url + "/limit", { method: "POST", headers, body: JSON.stringify(body) });
  t.equal(a.status, 200);
  t.same(envelopeProblems(a, "rate_limit"), []);
  t.equal(a.json.data.count, 1);
  const b = await request(node.url + "/limit", { method: "POST", headers, body: JSON.stringify(body) });
  t.equal(b.json.data.count, 2);
  t.equal((await request(node.url + "/limit", { method: "POST", headers, body: JSON.stringify(body) })).status, 429);
  t.equal((await request(node.url + "/health")).status, 200);
  t.equal(node.node.table.size >= 1, true, "state table alive");
});

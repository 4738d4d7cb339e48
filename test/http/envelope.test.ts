/**
 * Response bodies built from fragments: jsonString's escaping (quotes, backslash, control
 * characters, lone surrogates) gives valid JSON that round-trips; the allowed, blocked and
 * error bodies parse with every spec field; the RateLimit header formats.
 */
import t from "tap";
import { prng } from "../harness/prng.js";
import { allowedBody, API_VERSION, blockedBody, errorBody, formatMs, jsonString, policyHeader, decisionHeaders } from "../../src/http/envelope.js";
import { batchAllowedBody, batchBlockedBody } from "../../src/http/endpoints/batch.js";
import { algorithmByName } from "../../src/algorithms/index.js";
import type { Decision, LimitQuery } from "../../src/decision.js";
import { Errors } from "../../src/http/errors.js";
import { show } from "../harness/contract.js";

/** True when `s` survives a UTF-8 round trip unchanged (no lone surrogates). */
const wellFormed = (s: string) => Buffer.from(s, "utf8").toString("utf8") === s;

t.test("jsonString round-trips every kind of string as valid, well-formed JSON", async (t) => {
  const special = [
    '"',
    "\\",
    '\\"',
    '"\\',
    "/",
    "\u0000",
    "\b\f\n\r\t",
    "\u001f",
    "\u007f",
    "\u2028\u2029",
    "\ud800",
    "\udfff",
    "\udc00\ud800",
    "a\ud83d",
    "\ud83d\ude00",
    "é",
    "</script>",
    "${x}",
    "'",
    "",
  ];
  for (let c = 0; c < 0x20; c++) special.push(String.fromCharCode(c), `a${String.fromCharCode(c)}b`);
  for (const s of special) {
    const out = jsonString(s);
    let back: unknown;
    try {
      back = JSON.parse(out);
    } catch {
      t.fail(`not valid JSON for ${show(s)}: ${show(out)}`);
      continue;
    }
    t.equal(back, s, `round-trips ${show(s)}`);
    t.ok(wellFormed(out), `output is well-formed UTF-16 for ${show(s)}`);
  }
  t.equal(jsonString("plain-id_123"), '"plain-id_123"', "the fast path adds only quotes");
});

t.test("jsonString on random code-unit strings", async (t) => {
  const rnd = prng(987654321);
  let bad = 0;
  for (let i = 0; i < 5000; i++) {
    const units: number[] = [];
    for (let n = Math.floor(rnd() * 24); n > 0; n--) {
      const r = rnd();
      units.push(
        r < 0.3 ? Math.floor(rnd() * 0x80) : r < 0.5 ? 0xd800 + Math.floor(rnd() * 0x800) : r < 0.6 ? Math.floor(rnd() * 0x20) : Math.floor(rnd() * 0x10000),
      );
    }
    const s = String.fromCharCode(...units);
    const out = jsonString(s);
    try {
      if (JSON.parse(out) !== s || !wellFormed(out)) bad++;
    } catch {
      bad++;
    }
  }
  t.equal(bad, 0, "5000 random strings");
});

const query = (over: Partial<LimitQuery> = {}): LimitQuery => ({
  namespace: 'ns"x',
  identifier: "id\\\u0001\ud800",
  limit: 10,
  duration: 60,
  algorithm: algorithmByName("token-bucket")!,
  cost: 1,
  ...over,
});
const decision = (over: Partial<Decision> = {}): Decision => ({
  allowed: true,
  remaining: 7,
  resetTime: 1_800_000_000,
  retryAfterMs: 0,
  debt: 0,
  degraded: null,
  applied: null,
  shadow: false,
  duplicate: false,
  ...over,
});

t.test("allowedBody", async (t) => {
  const j = JSON.parse(allowedBody("req_abc_1", 1_799_999_999_123, query(), decision(), 0.12345));
  t.same(j, {
    id: "req_abc_1",
    timestamp: 1_799_999_999_123,
    api_version: API_VERSION,
    object: "rate_limit",
    data: {
      allowed: true,
      namespace: 'ns"x',
      identifier: "id\\\u0001\ud800",
      limit: 10,
      remaining: 7,
      reset_time: 1_800_000_000,
      count: 3,
      algorithm: "token-bucket",
      _request: { success: true, processing_time_ms: 0.123 },
    },
  });
  const d = JSON.parse(allowedBody("req_abc_2", 1, query(), decision({ degraded: "peer_timeout" }), 0)).data;
  t.equal(d.degraded, true, "degraded: true on a fail-open answer");
});

t.test("blockedBody", async (t) => {
  const j = JSON.parse(blockedBody("err_abc_1", 1_799_999_999_123, query(), decision({ allowed: false, remaining: 0, retryAfterMs: 1234567 }), 1.5));
  t.equal(j.object, "error");
  t.equal(j.id, "err_abc_1");
  t.same(j.data, {
    error: "Rate limit exceeded",
    status: 429,
    namespace: 'ns"x',
    identifier: "id\\\u0001\ud800",
    limit: 10,
    remaining: 0,
    reset_time: 1_800_000_000,
    retry_after: 1234.567,
    _request: { success: false, processing_time_ms: 1.5 },
  });
  t.equal(JSON.parse(blockedBody("e", 1, query(), decision({ allowed: false, retryAfterMs: 1 }), 0)).data.retry_after, 0.001, "millisecond precision");
});

t.test("a batch result has the single answer's data fields, in the same order", async (t) => {
  const single = JSON.parse(allowedBody("req_1", 1, query(), decision({ degraded: "handoff" }), 0)).data;
  delete single._request;
  const batch = JSON.parse(batchAllowedBody("req_2", 1, [query()], [decision({ degraded: "handoff" })], true, 0)).data;
  t.equal(JSON.stringify(batch.results[0]), JSON.stringify(single), "same fields, same order");
  const refused = JSON.parse(batchBlockedBody("err_3", 1, [query()], [decision({ allowed: false, remaining: 0, retryAfterMs: 1500 })], 1500, 0)).data;
  t.same(
    Object.keys(refused.results[0]),
    ["allowed", "namespace", "identifier", "limit", "remaining", "reset_time", "algorithm", "retry_after"],
    "a blocked result: no count, retry_after last",
  );
  t.equal(refused.results[0].retry_after, 1.5);
  t.equal(refused.error, Errors.rateLimited.message);
});

t.test("errorBody", async (t) => {
  for (const e of Object.values(Errors)) {
    const j = JSON.parse(errorBody("err_x", 5, e));
    t.same(j, { id: "err_x", timestamp: 5, api_version: API_VERSION, object: "error", data: { error: e.message, status: e.status } }, e.code);
  }
  const withDetails = JSON.parse(errorBody("err_y", 5, Errors.badRequest, [{ field: "limit", message: 'must be "an" integer\\' }]));
  t.same(withDetails.data.details, [{ field: "limit", message: 'must be "an" integer\\' }]);
  t.equal(Errors.badRequest.message, "Bad Request");
  t.equal(Errors.unauthorized.message, "Unauthorized");
  t.equal(Errors.internal.message, "Internal server error");
  t.equal(Errors.rateLimited.message, "Rate limit exceeded");
});

t.test("formatMs and headers", async (t) => {
  t.equal(formatMs(0.0004), 0);
  t.equal(formatMs(0.0005), 0.001);
  t.equal(formatMs(1.23456), 1.235);
  t.equal(formatMs(12), 12);
  t.equal(policyHeader("fixed-window", 100, 60), '"fixed-window";q=100;w=60');
  t.equal(
    decisionHeaders("leaky-bucket", 7, 31536000, 0, 31536000, "0123456789abcdef"),
    'application/json\r\nRingLimit-Ring-Version: 0123456789abcdef\r\nRateLimit-Policy: "leaky-bucket";q=7;w=31536000\r\nRateLimit: "leaky-bucket";r=0;t=31536000',
  );
  t.equal(
    decisionHeaders("leaky-bucket", 7, 31536000, 1, 5, "fedcba9876543210"),
    'application/json\r\nRingLimit-Ring-Version: fedcba9876543210\r\nRateLimit-Policy: "leaky-bucket";q=7;w=31536000\r\nRateLimit: "leaky-bucket";r=1;t=5',
    "a new ring version is not hidden by the kept prefix",
  );
});

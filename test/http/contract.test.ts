/**
 * The wire contract of POST /limit against a real uWS listener: every field of the
 * spec's 200 and 429 bodies, the envelope, the RateLimit headers, and the docs/api.md
 * rules that are visible from outside (effective namespace, default algorithm, unknown
 * fields, independent durations, a changed limit keeps the count).
 */
import t from "tap";
import { limit, type Reply } from "../harness/http-client.js";
import { useTestNode } from "../harness/in-process-node.js";
import { ALGORITHM_NAMES, API_VERSION, envelopeProblems, pool, show, uniqueId, validBody } from "../harness/contract.js";

const node = useTestNode(t);

async function timed(body: unknown, headers?: Record<string, string>): Promise<{ r: Reply; before: number; after: number }> {
  const before = Date.now();
  const r = await limit(node.url, body, headers);
  return { r, before, after: Date.now() };
}

t.test("200: every spec field, with the right types and values", async (t) => {
  const body = validBody({ namespace: "billing", identifier: uniqueId("user"), limit: 5, duration: 60 });
  const { r, before, after } = await timed(body);
  t.equal(r.status, 200);
  t.same(envelopeProblems(r, "rate_limit", { before, after }), []);
  const j = r.json;
  t.match(j.id, /^req_[A-Za-z0-9_]+$/);
  t.equal(j.api_version, API_VERSION);
  t.equal(j.object, "rate_limit");
  const d = j.data;
  t.equal(d.allowed, true);
  t.equal(d.namespace, "billing");
  t.equal(d.identifier, body.identifier);
  t.equal(d.limit, 5);
  t.equal(d.remaining, 4);
  t.equal(d.count, 1);
  t.equal(d.algorithm, "fixed-window", "default algorithm is fixed-window");
  t.ok(Number.isInteger(d.reset_time), "reset_time is whole seconds");
  // fixed-window: windows aligned to the epoch, reset at the end of the current one
  const windowEnd = (Math.floor(j.timestamp / 60_000) + 1) * 60;
  t.equal(d.reset_time, windowEnd, "reset_time = end of the epoch-aligned window");
  t.notOk("degraded" in d, "degraded is absent on a real decision");
  t.equal(d._request.success, true);
  t.type(d._request.processing_time_ms, "number");
  t.ok(d._request.processing_time_ms >= 0, "processing_time_ms >= 0");
  t.ok(d._request.processing_time_ms < 1000, "processing_time_ms is milliseconds, and small");
  t.same(Object.keys(d).sort(), ["_request", "algorithm", "allowed", "count", "identifier", "limit", "namespace", "remaining", "reset_time"]);
  t.same(Object.keys(j).sort(), ["api_version", "data", "id", "object", "timestamp"]);
});

t.test("200 headers: RateLimit-Policy and RateLimit (draft-10), no Retry-After", async (t) => {
  const { r } = await timed(validBody({ limit: 7, duration: 90 }));
  t.equal(r.status, 200);
  t.equal(r.headers["ratelimit-policy"], '"fixed-window";q=7;w=90');
  const m = /^"fixed-window";r=(\d+);t=(\d+)$/.exec(String(r.headers["ratelimit"]));
  t.ok(m, `RateLimit header ${r.headers["ratelimit"]}`);
  t.equal(Number(m![1]), r.json.data.remaining, "r = remaining");
  t.equal(Number(m![2]), r.json.data.reset_time - Math.floor(r.json.timestamp / 1000), "t = whole seconds until reset_time");
  t.ok(Number(m![2]) >= 1 && Number(m![2]) <= 90);
  t.equal(r.headers["retry-after"], undefined);
});

t.test("429: body fields, envelope and headers", async (t) => {
  const body = validBody({ namespace: "ns429", product: "Pro Plan", limit: 2, duration: 3600 });
  t.equal((await limit(node.url, body)).status, 200);
  t.equal((await limit(node.url, body)).status, 200);
  const { r, before, after } = await timed(body);
  t.equal(r.status, 429);
  t.same(envelopeProblems(r, "error", { before, after }), []);
  const j = r.json;
  t.match(j.id, /^err_/);
  t.equal(j.object, "error");
  const d = j.data;
  t.equal(d.error, "Rate limit exceeded");
  t.equal(d.status, 429);
  t.equal(d.namespace, "ns429.pro-plan", "effective namespace on a 429 too");
  t.equal(d.identifier, body.identifier);
  t.equal(d.limit, 2);
  t.equal(d.remaining, 0);
  t.ok(Number.isInteger(d.reset_time));
  t.equal(d.reset_time, (Math.floor(j.timestamp / 3_600_000) + 1) * 3600);
  t.type(d.retry_after, "number");
  t.ok(d.retry_after > 0, "retry_after > 0");
  t.ok(d.retry_after <= 3600);
  // fixed-window: one request fits again when the window ends
  t.equal(Math.round(d.retry_after * 1000), d.reset_time * 1000 - j.timestamp, "retry_after = ms to the window end");
  t.equal(d._request.success, false);
  t.ok(d._request.processing_time_ms >= 0);
  t.equal(r.headers["ratelimit-policy"], '"fixed-window";q=2;w=3600');
  t.equal(r.headers["ratelimit"], `"fixed-window";r=0;t=${d.reset_time - Math.floor(j.timestamp / 1000)}`);
  t.equal(r.headers["retry-after"], String(Math.max(1, Math.ceil(d.retry_after))), "Retry-After = ceil(retry_after)");
  t.ok(Number(r.headers["retry-after"]) >= 1);
});

t.test("429 with a sub-second retry_after still says Retry-After: 1 or more", async (t) => {
  // token bucket: limit 1 per 1 s → after one request, the next token is ≤ 1000 ms away
  const body = validBody({ algorithm: "token-bucket", limit: 1, duration: 1 });
  for (let attempt = 0; attempt < 5; attempt++) {
    const a = await limit(node.url, body);
    const b = await limit(node.url, body);
    if (a.status !== 200 || b.status !== 429) continue; // a refill landed between them; try again
    t.ok(b.json.data.retry_after > 0 && b.json.data.retry_after <= 1, `retry_after ${b.json.data.retry_after}`);
    t.equal(b.headers["retry-after"], "1");
    return;
  }
  t.fail("never saw 200 then 429 on a 1-per-second token bucket");
});

t.test("count + remaining = limit on every 200, for each algorithm", async (t) => {
  for (const algorithm of ALGORITHM_NAMES) {
    const body = validBody({ algorithm, limit: 6, duration: 31536000 });
    const statuses: number[] = [];
    for (let i = 1; i <= 8; i++) {
      const r = await limit(node.url, body);
      statuses.push(r.status);
      t.equal(r.headers["ratelimit-policy"], `"${algorithm}";q=6;w=31536000`, `${algorithm} policy header`);
      if (r.status === 200) {
        t.same(envelopeProblems(r, "rate_limit"), []);
        t.equal(r.json.data.algorithm, algorithm, `${algorithm} echoed`);
        t.equal(r.json.data.count, i, `${algorithm} count ${i}`);
        t.equal(r.json.data.count + r.json.data.remaining, 6, `${algorithm}: count + remaining = limit`);
        t.ok(r.json.data.reset_time * 1000 > r.json.timestamp, `${algorithm}: reset_time in the future`);
      } else {
        t.same(envelopeProblems(r, "error"), []);
        t.equal(r.json.data.remaining, 0);
        t.ok(r.json.data.retry_after > 0);
      }
    }
    t.same(statuses, [200, 200, 200, 200, 200, 200, 429, 429], `${algorithm}: 6 allowed then blocked`);
  }
});

t.test("effective namespace: namespace.product-slug, or namespace alone", async (t) => {
  const id = uniqueId();
  const plain = await limit(node.url, { namespace: "shop", identifier: id, limit: 1, duration: 600 });
  t.equal(plain.json.data.namespace, "shop");
  const withProduct = await limit(node.url, { namespace: "shop", product: "Café Pro!", identifier: id, limit: 1, duration: 600 });
  t.equal(withProduct.status, 200, "namespace.product is a different key from namespace alone");
  t.equal(withProduct.json.data.namespace, "shop.cafe-pro");
  const again = await limit(node.url, { namespace: "shop", product: "CAFE   pro", identifier: id, limit: 1, duration: 600 });
  t.equal(again.status, 429, "products with the same slug share the key");
  t.equal(again.json.data.namespace, "shop.cafe-pro");
});

t.test("every algorithm name is accepted and applied; the default is fixed-window", async (t) => {
  for (const algorithm of ALGORITHM_NAMES) {
    const r = await limit(node.url, validBody({ algorithm }));
    t.equal(r.status, 200, algorithm);
    t.equal(r.json.data.algorithm, algorithm);
    t.match(String(r.headers["ratelimit"]), new RegExp(`^"${algorithm}";r=9;t=\\d+$`));
  }
  const r = await limit(node.url, validBody());
  t.equal(r.json.data.algorithm, "fixed-window");
  t.equal(r.headers["ratelimit-policy"], '"fixed-window";q=10;w=60');
});

t.test("the same identifier under different algorithms keeps separate state", async (t) => {
  const id = uniqueId();
  for (const algorithm of ALGORITHM_NAMES) {
    const r = await limit(node.url, { namespace: "algs", identifier: id, limit: 1, duration: 3600, algorithm });
    t.equal(r.status, 200, `${algorithm}: first request allowed`);
  }
});

t.test("unknown fields are ignored", async (t) => {
  const body = validBody({ limit: 3, extra: 1, nested: { deep: [1, 2, { x: null }] }, colour: "blue", _request: { success: false }, count: 99, remaining: -5 });
  const r = await limit(node.url, body);
  t.equal(r.status, 200);
  t.equal(r.json.data.count, 1);
  t.equal(r.json.data.remaining, 2);
  t.notOk("extra" in r.json.data || "colour" in r.json.data, "unknown fields are not echoed");
});

t.test("two limits on one identifier with different durations are independent", async (t) => {
  const base = { namespace: "api", identifier: uniqueId(), limit: 2 };
  const minute = { ...base, duration: 60 };
  const hour = { ...base, duration: 3600 };
  t.equal((await limit(node.url, minute)).json.data.count, 1);
  t.equal((await limit(node.url, minute)).json.data.count, 2);
  t.equal((await limit(node.url, minute)).status, 429, "per-minute limit used up");
  const h = await limit(node.url, hour);
  t.equal(h.status, 200, "per-hour limit untouched by the per-minute one");
  t.equal(h.json.data.count, 1);
  t.equal(h.json.data.remaining, 1);
  t.equal((await limit(node.url, minute)).status, 429, "per-minute still blocked");
});

t.test("a changed limit keeps the count (and blocked requests are not counted)", async (t) => {
  const base = { namespace: "change", identifier: uniqueId(), duration: 31536000 };
  for (let i = 1; i <= 3; i++) t.equal((await limit(node.url, { ...base, limit: 5 })).json.data.count, i);
  // 3 used; a limit of 3 is already reached: blocked, not counted
  const blocked = await limit(node.url, { ...base, limit: 3 });
  t.equal(blocked.status, 429);
  t.equal(blocked.json.data.remaining, 0);
  t.equal(blocked.json.data.limit, 3);
  // a limit of 10 sees the 3 (not 4) earlier requests
  const raised = await limit(node.url, { ...base, limit: 10 });
  t.equal(raised.status, 200);
  t.equal(raised.json.data.count, 4);
  t.equal(raised.json.data.remaining, 6);
  t.equal(raised.json.data.limit, 10);
  // 4 used; limit 5 has exactly one left
  const five = await limit(node.url, { ...base, limit: 5 });
  t.equal(five.json.data.count, 5);
  t.equal(five.json.data.remaining, 0);

  // the brief's example, fresh key: 3 used of 5, then limit 4 → allowed with remaining 0
  const other = { namespace: "change", identifier: uniqueId(), duration: 31536000 };
  for (let i = 0; i < 3; i++) await limit(node.url, { ...other, limit: 5 });
  const four = await limit(node.url, { ...other, limit: 4 });
  t.equal(four.status, 200);
  t.equal(four.json.data.count, 4);
  t.equal(four.json.data.remaining, 0);
  t.equal((await limit(node.url, { ...other, limit: 4 })).status, 429);
  const ten = await limit(node.url, { ...other, limit: 10 });
  t.equal(ten.json.data.remaining, 5, "4 counted, the blocked one not: 10 - 5");
});

t.test("a lowered limit clamps remaining at 0 for each algorithm", async (t) => {
  for (const algorithm of ALGORITHM_NAMES) {
    const base = { namespace: "clamp", identifier: uniqueId(), duration: 31536000, algorithm };
    for (let i = 0; i < 5; i++) t.equal((await limit(node.url, { ...base, limit: 10 })).status, 200);
    const r = await limit(node.url, { ...base, limit: 2 });
    t.equal(r.status, 429, `${algorithm}: 5 used is over a limit of 2 (${r.text})`);
    t.equal(r.json.data.remaining, 0);
    t.ok(r.json.data.retry_after > 0);
    const back = await limit(node.url, { ...base, limit: 10 });
    t.equal(back.status, 200, `${algorithm}: raising the limit again admits`);
    t.equal(back.json.data.count, 6, `${algorithm}: state kept across limit changes (${back.text})`);
  }
});

t.test("identifier and namespace strings are echoed exactly, whatever their characters", async (t) => {
  const odd = [`quote"back\\slash`, "tab\tnew\nline\u0001\u001f", "é漢字😀", "\u2028\u2029", "</script>&<>", "a".repeat(512)];
  for (const identifier of odd) {
    const r = await limit(node.url, { namespace: `ns"\\${identifier.slice(0, 10)}`, identifier, limit: 5, duration: 60 });
    t.equal(r.status, 200, show(identifier).slice(0, 40));
    t.ok(r.json !== undefined, "response is valid JSON");
    t.equal(r.json.data.identifier, identifier, "identifier round-trips");
    t.equal(r.json.data.namespace, `ns"\\${identifier.slice(0, 10)}`);
  }
});

t.test("envelope ids are unique across many responses of every kind", async (t) => {
  const bodies: unknown[] = [];
  const shared = validBody({ limit: 100 });
  for (let i = 0; i < 600; i++) {
    if (i % 3 === 0)
      bodies.push(shared); // 200 then 429 once over 100
    else if (i % 3 === 1) bodies.push(validBody());
    else bodies.push({ namespace: "" }); // 400
  }
  const replies = await pool(bodies, 32, (b) => limit(node.url, b));
  const ids = replies.map((r) => r.json.id as string);
  t.equal(new Set(ids).size, ids.length, "no id repeats");
  const statuses = new Set(replies.map((r) => r.status));
  t.same([...statuses].sort(), [200, 400, 429]);
  for (const r of replies) {
    const kind = r.status === 200 ? "rate_limit" : "error";
    const problems = envelopeProblems(r, kind);
    if (problems.length > 0) t.fail(`${r.status}: ${problems.join("; ")}`);
  }
});

t.test("timestamp is now in Unix milliseconds", async (t) => {
  const { r, before, after } = await timed(validBody());
  t.ok(r.json.timestamp >= before - 5 && r.json.timestamp <= after + 5, `${before} <= ${r.json.timestamp} <= ${after}`);
  t.ok(r.json.timestamp > 1.6e12, "milliseconds, not seconds");
});

/**
 * POST /limit/batch on one real node: all or nothing, results in order with the single
 * answer's fields, Retry-After the largest wait, items of one identifier counted against
 * each other, per-item validation errors, and concurrent batches never over-admitting.
 */
import t from "tap";
import { limit, post, request } from "../harness/http-client.js";
import { useTestNode } from "../harness/in-process-node.js";
import { envelopeProblems, uniqueId } from "../harness/contract.js";

const node = useTestNode(t);

const item = (identifier: string, extra: Record<string, unknown> = {}) => ({ namespace: "batch", identifier, limit: 5, duration: 3600, ...extra });

t.test("every item allowed: 200, all counted, results in order", async (t) => {
  const a = uniqueId("a");
  const b = uniqueId("b");
  const r = await post(node.url, "/limit/batch", { requests: [item(a, { cost: 2 }), item(b), item(a, { algorithm: "token-bucket" })] });
  t.equal(r.status, 200);
  t.same(envelopeProblems(r, "rate_limit_batch"), []);
  t.equal(r.json.api_version, "v2026.8.23");
  t.equal(r.json.data.allowed, true);
  const results = r.json.data.results;
  t.equal(results.length, 3);
  t.same(
    results.map((x: { identifier: string; count: number; remaining: number; algorithm: string }) => [x.identifier, x.count, x.remaining, x.algorithm]),
    [
      [a, 2, 3, "fixed-window"],
      [b, 1, 4, "fixed-window"],
      [a, 1, 4, "token-bucket"],
    ],
  );
  for (const x of results) {
    t.same(Object.keys(x).sort(), ["algorithm", "allowed", "count", "identifier", "limit", "namespace", "remaining", "reset_time"]);
  }
  t.equal((await limit(node.url, item(a, { cost: 0 }))).json.data.count, 2, "the batch counted on the single endpoint's state");
});

t.test("one item blocked: 429, nothing counted, Retry-After is the largest wait", async (t) => {
  const a = uniqueId("a");
  const full = uniqueId("full");
  const slow = uniqueId("slow");
  t.equal((await limit(node.url, item(full, { cost: 5 }))).status, 200);
  t.equal((await limit(node.url, item(slow, { limit: 2, duration: 100, algorithm: "token-bucket", cost: 2 }))).status, 200);
  const r = await post(node.url, "/limit/batch", {
    requests: [item(a, { cost: 3 }), item(full), item(slow, { limit: 2, duration: 100, algorithm: "token-bucket", cost: 2 })],
  });
  t.equal(r.status, 429);
  t.same(envelopeProblems(r, "error"), []);
  t.equal(r.json.data.error, "Rate limit exceeded");
  t.equal(r.json.data.allowed, false);
  const [x, y, z] = r.json.data.results;
  t.equal(x.allowed, true, "the first item alone would pass");
  t.equal(x.count, 0, "but it was not counted");
  t.equal(x.remaining, 5);
  t.equal(y.allowed, false);
  t.ok(y.retry_after > 0);
  t.equal(z.allowed, false);
  t.ok(z.retry_after > 99 && z.retry_after <= 100, "2 tokens at 1 per 50 s");
  t.equal(r.json.data.retry_after, Math.max(y.retry_after, z.retry_after));
  t.equal(r.headers["retry-after"], String(Math.ceil(r.json.data.retry_after)));
  t.equal((await limit(node.url, item(a, { cost: 0 }))).json.data.count, 0, "nothing of the batch was counted");
});

t.test("items on one state count against each other", async (t) => {
  const a = uniqueId("same");
  const ok = await post(node.url, "/limit/batch", { requests: [item(a, { cost: 3 }), item(a, { cost: 2 })] });
  t.equal(ok.status, 200, "3 + 2 = 5 fits");
  t.same(
    ok.json.data.results.map((x: { remaining: number }) => x.remaining),
    [2, 0],
  );
  const b = uniqueId("same");
  const no = await post(node.url, "/limit/batch", { requests: [item(b, { cost: 3 }), item(b, { cost: 3 })] });
  t.equal(no.status, 429, "3 + 3 > 5");
  t.equal((await limit(node.url, item(b, { cost: 0 }))).json.data.remaining, 5, "nothing counted");
});

t.test("validation: 1 to 100 items, errors per item as requests[i].field", async (t) => {
  const bad = async (body: unknown, fields: string[], what: string) => {
    const r = await post(node.url, "/limit/batch", body);
    t.equal(r.status, 400, what);
    t.same(envelopeProblems(r, "error"), [], `${what}: error envelope`);
    t.same(
      r.json.data.details.map((d: { field: string }) => d.field),
      fields,
      what,
    );
  };
  await bad({}, ["requests"], "no requests");
  await bad({ requests: [] }, ["requests"], "empty");
  await bad({ requests: Array.from({ length: 101 }, (_, i) => item(`x${i}`)) }, ["requests"], "101 items");
  await bad({ requests: "x" }, ["requests"], "not an array");
  await bad([], ["body"], "not an object");
  await bad(
    { requests: [item("a"), item("b", { limit: 0 }), item("c"), { ...item("d"), identifier: undefined, cost: -1 }] },
    ["requests[1].limit", "requests[3].identifier", "requests[3].cost"],
    "per item",
  );
  await bad({ requests: [item("a", { cost: 6 })] }, ["requests[0].cost"], "cost above limit");
  await bad({ requests: [1] }, ["requests[0]"], "an item that is not an object");
  const r = await post(node.url, "/limit/batch", { requests: Array.from({ length: 100 }, () => item(uniqueId("hundred"))) });
  t.equal(r.status, 200, "100 items");
  t.equal(r.json.data.results.length, 100);
  const wrongMethod = await request(node.url + "/limit/batch");
  t.equal(wrongMethod.status, 405);
  t.equal(wrongMethod.headers.allow, "POST");
});

t.test("concurrent batches on one key admit exactly the limit", async (t) => {
  const a = uniqueId("race");
  const b = uniqueId("race");
  // Each batch takes 1 of a (limit 20) and 2 of b (limit 40): exactly 20 batches can pass.
  const batch = { requests: [item(a, { limit: 20 }), item(b, { limit: 40, cost: 2 })] };
  const replies = await Promise.all(Array.from({ length: 60 }, () => post(node.url, "/limit/batch", batch)));
  t.equal(replies.filter((r) => r.status === 200).length, 20);
  t.equal(replies.filter((r) => r.status === 429).length, 40);
  t.equal((await limit(node.url, item(b, { limit: 41, cost: 0 }))).json.data.count, 40, "no count from a refused batch");
  t.equal((await limit(node.url, item(a, { limit: 21, cost: 0 }))).json.data.count, 20);
});

t.test("metrics by endpoint", async (t) => {
  const m = await request(node.url + "/metrics");
  t.match(m.text, /ringlimit_endpoint_requests_total\{endpoint="\/limit\/batch",status="200"\} \d+/);
  t.match(m.text, /ringlimit_endpoint_requests_total\{endpoint="\/limit\/batch",status="429"\} \d+/);
  t.match(m.text, /ringlimit_endpoint_requests_total\{endpoint="\/limit\/batch",status="400"\} \d+/);
  t.match(m.text, /ringlimit_batch_items_total \d+/);
});

/**
 * `cost` and peek on POST /limit over a real listener: what an allowed request counts, that
 * a cost that does not fit counts nothing and waits exactly, the 400s, and that a request
 * without `cost` gets the answer it always got.
 */
import t from "tap";
import { limit, request } from "../harness/http-client.js";
import { useTestNode } from "../harness/in-process-node.js";
import { uniqueId } from "../harness/contract.js";
import { ALGORITHM_NAMES } from "../../src/algorithms/index.js";

const node = useTestNode(t);
const ALGORITHMS = ALGORITHM_NAMES;

for (const algorithm of ALGORITHMS) {
  t.test(`${algorithm}: cost counts that many, a cost that does not fit counts nothing`, async (t) => {
    const base = { namespace: "cost", identifier: uniqueId(algorithm), limit: 10, duration: 3600, algorithm };
    const a = await limit(node.url, { ...base, cost: 6 });
    t.equal(a.status, 200);
    t.equal(a.json.data.count, 6);
    t.equal(a.json.data.remaining, 4);
    const b = await limit(node.url, { ...base, cost: 5 });
    t.equal(b.status, 429, "6 + 5 > 10");
    t.ok(b.json.data.retry_after > 0, "retry_after until the 5 fit");
    t.ok(Number(b.headers["retry-after"]) >= 1);
    const peek = await limit(node.url, { ...base, cost: 0 });
    t.equal(peek.status, 200, "a peek while 4 remain");
    t.equal(peek.json.data.count, 6, "peek: count as it stands");
    t.equal(peek.json.data.remaining, 4, "peek: remaining as it stands (the refused 5 were not counted)");
    const c = await limit(node.url, { ...base, cost: 4 });
    t.equal(c.status, 200);
    t.equal(c.json.data.remaining, 0);
    const full = await limit(node.url, { ...base, cost: 0 });
    t.equal(full.status, 429, "a peek at a full limit answers 429");
    t.ok(full.json.data.retry_after > 0);
    const again = await limit(node.url, { ...base, cost: 0 });
    t.equal(again.json.data.retry_after <= full.json.data.retry_after, true, "peeks counted nothing");
  });
}

t.test("token-bucket: retry_after is the exact wait until the whole cost has refilled", async (t) => {
  // 1000 per 1000 s: a token per second. Take all, then ask for 3.
  const base = { namespace: "cost", identifier: uniqueId("tb"), limit: 1000, duration: 1000, algorithm: "token-bucket" };
  const emptied = Date.now();
  t.equal((await limit(node.url, { ...base, cost: 1000 })).status, 200);
  const b = await limit(node.url, { ...base, cost: 3 });
  t.equal(b.status, 429);
  // What refilled between the two requests is owed no wait: the bound is the time they took
  // (a fixed 0.1 s assumed a fast machine; at load 35 it was 0.16 s).
  const between = (Date.now() - emptied) / 1000;
  t.ok(b.json.data.retry_after >= 3 - between - 0.001 && b.json.data.retry_after <= 3, `3 tokens at 1/s: ${b.json.data.retry_after} (${between} s between)`);
  t.equal(b.headers["retry-after"], "3");
});

t.test("without cost, answers are exactly those of cost 1", async (t) => {
  const id = uniqueId("plain");
  const base = { namespace: "cost", limit: 3, duration: 3600 };
  for (let i = 0; i < 4; i++) {
    const x = await limit(node.url, { ...base, identifier: id + "a" });
    const y = await limit(node.url, { ...base, identifier: id + "b", cost: 1 });
    t.equal(x.status, y.status, `request ${i}`);
    t.same(Object.keys(x.json.data), Object.keys(y.json.data), "the same fields: cost adds none");
    t.equal(x.json.data.remaining, y.json.data.remaining);
    t.equal(x.json.api_version, "v2026.8.23");
  }
});

t.test("cost is validated: an integer from 0 to 1000000, never above limit", async (t) => {
  const base = { namespace: "cost", identifier: "v", limit: 5, duration: 60 };
  for (const cost of [-1, 1.5, "2", true, null, 1_000_001]) {
    const r = await limit(node.url, { ...base, cost });
    t.equal(r.status, 400, `cost ${JSON.stringify(cost)}`);
    t.same(r.json.data.details, [{ field: "cost", message: "must be an integer from 0 to 1000000" }]);
  }
  const over = await limit(node.url, { ...base, cost: 6 });
  t.equal(over.status, 400, "cost above limit");
  t.same(over.json.data.details, [{ field: "cost", message: "must not be above limit" }]);
  t.equal((await limit(node.url, { ...base, identifier: uniqueId("edge"), cost: 5 })).status, 200, "cost = limit is allowed");
  const m = await request(node.url + "/metrics");
  t.match(m.text, /ringlimit_requests_total\{status="400",algorithm="none"\} \d+/, "400s keep the existing metric");
  t.match(m.text, /ringlimit_endpoint_requests_total\{endpoint="\/limit",status="400"\} \d+/, "and appear by endpoint");
});

/**
 * POST /limit/charge on one real node (docs/api.md): debt, refunds, what POST /limit and
 * batches answer while a key is in debt, the uint32 budget, and the 400s that count nothing.
 */
import t from "tap";
import { limit, post } from "../../harness/http-client.js";
import { useTestNode } from "../../harness/in-process-node.js";
import { ALGORITHM_NAMES, clearOfWindowEnd, envelopeProblems, uniqueId } from "../../harness/contract.js";

const node = useTestNode(t);
const charge = (body: Record<string, unknown>) => post(node.url, "/limit/charge", body);

t.test("a charge past the budget is counted (debt), blocks /limit and batches, and a refund pays it back", async (t) => {
  await clearOfWindowEnd(3600, 30_000);
  const key = { namespace: "charge", identifier: uniqueId("llm"), limit: 1000, duration: 3600 };
  const first = await charge({ ...key, cost: 1500 });
  t.equal(first.status, 200, "a charge is never refused for want of room");
  t.same(envelopeProblems(first, "rate_limit"), []);
  const d = first.json.data;
  t.same([d.allowed, d.count, d.remaining, d.debt, d.cost], [false, 1500, 0, 500, 1500]);
  const windowEnd = Math.ceil((Date.now() + 1) / 3_600_000) * 3600;
  t.equal(d.reset_time, windowEnd, "the full limit is back when the window ends");
  t.ok(d.retry_after > 0 && d.retry_after <= 3600, "a request of 1 waits for the window's end");

  const blocked = await limit(node.url, key);
  t.equal(blocked.status, 429, "in debt: POST /limit is refused");
  t.equal(blocked.json.data.reset_time, windowEnd);
  const batch = await post(node.url, "/limit/batch", { requests: [key] });
  t.equal(batch.status, 429, "and a batch that holds the key");

  const refund = await charge({ ...key, cost: -600 });
  t.equal(refund.status, 200);
  t.same([refund.json.data.count, refund.json.data.remaining, refund.json.data.debt, refund.json.data.retry_after], [900, 100, 0, 0]);
  const after = await limit(node.url, key);
  t.equal(after.status, 200, "paid back: allowed again");
  t.equal(after.json.data.remaining, 99);

  const overRefund = await charge({ ...key, cost: -1_000_000_000 });
  t.same([overRefund.json.data.count, overRefund.json.data.remaining], [0, 1000], "the count never goes below zero");
});

for (const algorithm of ALGORITHM_NAMES) {
  t.test(`${algorithm}: debt and refund through /limit/charge`, async (t) => {
    await clearOfWindowEnd(86_400, 60_000);
    // A year-long bucket refills one token in 31.5 s: the counts below cannot move while the test runs.
    const key = { namespace: "charge", identifier: uniqueId(algorithm), limit: 1000, duration: 31_536_000, algorithm };
    const past = await charge({ ...key, cost: 1200 });
    t.equal(past.status, 200);
    t.same([past.json.data.allowed, past.json.data.count, past.json.data.debt, past.json.data.remaining], [false, 1200, 200, 0], "past the limit by 200");
    t.equal((await limit(node.url, key)).status, 429, "a request of 1 is refused in debt");
    const back = await charge({ ...key, cost: -300 });
    t.ok(back.json.data.allowed, "paid back");
    t.equal(back.json.data.debt, 0);
    t.ok(back.json.data.count <= 900 && back.json.data.count >= 0, `count ${back.json.data.count}`);
    t.equal((await limit(node.url, key)).status, 200);
  });
}

t.test("a token bucket of 1,000 per 60 s charged 1,500 answers retry_after 30.06", async (t) => {
  const key = { namespace: "charge", identifier: uniqueId("tb"), limit: 1000, duration: 60, algorithm: "token-bucket" };
  const r = await charge({ ...key, cost: 1500 });
  t.same([r.json.data.count, r.json.data.debt, r.json.data.retry_after], [1500, 500, 30.06]);
});

t.test("budgets of uint32 size: /limit/charge takes them, POST /limit keeps its bounds", async (t) => {
  await clearOfWindowEnd(3600, 30_000);
  const key = { namespace: "charge", identifier: uniqueId("big"), limit: 4_294_967_295, duration: 3600 };
  const r = await charge({ ...key, cost: 1_000_000_000 });
  t.equal(r.status, 200);
  t.same([r.json.data.count, r.json.data.remaining], [1_000_000_000, 3_294_967_295]);
  t.equal((await limit(node.url, { ...key, limit: 5_000_000 })).status, 400, "POST /limit: limit at most 1,000,000");
  t.equal((await charge({ ...key, limit: 4_294_967_296, cost: 1 })).status, 400, "above uint32");
});

t.test("bad costs are 400 and count nothing", async (t) => {
  await clearOfWindowEnd(3600, 30_000);
  const key = { namespace: "charge", identifier: uniqueId("bad"), limit: 10, duration: 3600 };
  for (const cost of [0, 1.5, "5", 1_000_000_001, -1_000_000_001, null, true]) {
    const r = await charge({ ...key, cost });
    t.equal(r.status, 400, `cost ${JSON.stringify(cost)}`);
    t.equal(r.json.data.details?.[0]?.field, "cost", `names the field: ${r.text}`);
  }
  t.equal((await charge(key)).status, 400, "cost is required");
  t.equal((await limit(node.url, key)).json.data.remaining, 9, "nothing was counted");
});

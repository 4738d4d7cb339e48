/**
 * The client's charge() and reserve-then-settle against a real node (docs/client.md): a
 * charge past the budget is counted and blocks the next limit(); settle() charges or refunds
 * the difference to the estimate; a node that does not answer a charge leaves it "unknown",
 * never sent twice.
 */
import t from "tap";
import { RingLimitClient } from "../../src/client/index.js";
import { clearOfWindowEnd, uniqueId } from "../harness/contract.js";
import { TEST_KEY } from "../harness/http-client.js";
import { startTestNode } from "../harness/in-process-node.js";

const node = await startTestNode();
t.teardown(() => node.stop());
const client = new RingLimitClient({ urls: node.url, apiKey: TEST_KEY, timeoutMs: 5000 });
t.teardown(() => client.close());
await client.ready();

t.test("charge(): counted past the budget, then limit() is refused; a refund pays it back", async (t) => {
  await clearOfWindowEnd(3600, 30_000);
  const key = { namespace: "client-charge", identifier: uniqueId("c"), limit: 1000, duration: 3600 };
  const r = await client.charge({ ...key, cost: 1500 });
  t.match(r, { counted: true, status: 200, source: "owner" });
  t.same([r.data?.count, r.data?.debt, r.data?.remaining], [1500, 500, 0]);
  t.equal((await client.limit(key)).allowed, false, "in debt");
  const back = await client.charge({ ...key, cost: -600 });
  t.same([back.counted, back.data?.count], [true, 900]);
  t.equal((await client.limit(key)).allowed, true, "the refund cleared the client's remembered 429 too");
  t.match(await client.charge({ ...key, cost: 0 }), { counted: false, status: 400 }, "a bad cost is refused");
});

t.test("reserve-then-settle: the estimate is counted, settle() charges or refunds the difference", async (t) => {
  await clearOfWindowEnd(3600, 30_000);
  const key = { namespace: "client-charge", identifier: uniqueId("r"), limit: 1000, duration: 3600 };
  const more = await client.reserve({ ...key, cost: 100 });
  t.equal(more.allowed, true);
  t.equal(more.data?.remaining, 900, "the estimate is counted");
  const extra = await more.settle(350);
  t.same([extra?.counted, extra?.data?.count], [true, 350], "the 250 beyond the estimate charged");
  t.equal(await more.settle(1), undefined, "settled once");
  const less = await client.reserve({ ...key, cost: 100 });
  const refund = await less.settle(40);
  t.same([refund?.data?.count], [390], "the 60 not used given back");
  const exact = await client.reserve({ ...key, cost: 10 });
  t.equal(await exact.settle(10), undefined, "nothing to settle");
  const refused = await client.reserve({ ...key, cost: 1000 });
  t.equal(refused.allowed, false);
  t.equal(await refused.settle(1000), undefined, "a refused reservation counted nothing and reports nothing");
});

t.test("a charge no node answers is 'unknown', sent once", async (t) => {
  const dead = new RingLimitClient({ urls: "http://127.0.0.1:9", apiKey: TEST_KEY, timeoutMs: 200, discoveryWaitMs: 0 });
  t.teardown(() => dead.close());
  const r = await dead.charge({ namespace: "client-charge", identifier: "x", limit: 10, duration: 60, cost: 5 });
  t.match(r, { counted: "unknown", status: 0, source: "client" });
});

/** POST /limit/reset on one real node: what is removed, and that the identifier starts afresh. */
import t from "tap";
import { limit, post } from "../harness/http-client.js";
import { useTestNode } from "../harness/in-process-node.js";
import { envelopeProblems, uniqueId } from "../harness/contract.js";

const node = useTestNode(t);

t.test("reset of every state of an identifier", async (t) => {
  const id = uniqueId("reset");
  const base = { namespace: "reset", product: "Mobile App", identifier: id, limit: 2 };
  for (const [algorithm, duration] of [
    ["fixed-window", 60],
    ["fixed-window", 3600],
    ["token-bucket", 60],
  ] as const) {
    await limit(node.url, { ...base, algorithm, duration, cost: 2 });
  }
  await limit(node.url, { ...base, identifier: id + "-other", duration: 60, cost: 2 });
  t.equal((await limit(node.url, { ...base, duration: 60 })).status, 429);
  const r = await post(node.url, "/limit/reset", { namespace: "reset", product: "Mobile App", identifier: id });
  t.equal(r.status, 200);
  t.same(envelopeProblems(r, "rate_limit_reset"), []);
  t.equal(r.json.data.namespace, "reset.mobile-app");
  t.equal(r.json.data.identifier, id);
  const removed = r.json.data.removed.map((x: { algorithm: string; duration: number }) => `${x.algorithm}/${x.duration}`).sort();
  t.same(removed, ["fixed-window/3600", "fixed-window/60", "token-bucket/60"]);
  t.equal((await limit(node.url, { ...base, duration: 60 })).json.data.remaining, 1, "starts afresh");
  t.equal((await limit(node.url, { ...base, identifier: id + "-other", duration: 60 })).status, 429, "another identifier is untouched");
  const again = await post(node.url, "/limit/reset", { namespace: "reset", product: "Mobile App", identifier: id + "-none" });
  t.same(again.json.data.removed, [], "nothing to remove: 200 with an empty list");
});

t.test("reset of the one state named", async (t) => {
  const id = uniqueId("one");
  const base = { namespace: "reset", identifier: id, limit: 1 };
  await limit(node.url, { ...base, duration: 60 });
  await limit(node.url, { ...base, duration: 120 });
  await limit(node.url, { ...base, duration: 60, algorithm: "sliding-window" });
  const r = await post(node.url, "/limit/reset", { namespace: "reset", identifier: id, algorithm: "fixed-window", duration: 60 });
  t.same(r.json.data.removed, [{ algorithm: "fixed-window", duration: 60 }]);
  t.equal((await limit(node.url, { ...base, duration: 60 })).status, 200);
  t.equal((await limit(node.url, { ...base, duration: 120 })).status, 429);
  const alg = await post(node.url, "/limit/reset", { namespace: "reset", identifier: id, algorithm: "sliding-window" });
  t.same(alg.json.data.removed, [{ algorithm: "sliding-window", duration: 60 }], "an algorithm without a duration: all its durations");
});

t.test("reset validation", async (t) => {
  for (const [body, fields] of [
    [{ identifier: "x" }, ["namespace"]],
    [{ namespace: "n", identifier: "x", duration: 0 }, ["duration"]],
    [{ namespace: "n", identifier: "x", algorithm: "nope" }, ["algorithm"]],
    [{ namespace: "n", product: "!!", identifier: "x" }, ["product"]],
  ] as const) {
    const r = await post(node.url, "/limit/reset", body);
    t.equal(r.status, 400);
    t.same(
      r.json.data.details.map((d: { field: string }) => d.field),
      fields,
    );
  }
  const unauth = await post(node.url, "/limit/reset", { namespace: "n", identifier: "x" }, { authorization: "Bearer nope" });
  t.equal(unauth.status, 401);
});

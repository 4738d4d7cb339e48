/**
 * Fail-open when a decision itself throws (docs/api.md, Fail-open: reason "internal"). No request can
 * make the real deciders throw, so the fault enters through the front end's Decider
 * interface: a decider that throws, behind a real uWS listener, real auth, real metrics.
 */
import { Directory } from "../../src/shard/cluster/membership/directory.js";
import t from "tap";
import { ApiKeyVerifier } from "../../src/auth/api-keys.js";
import type { Decider } from "../../src/decision.js";
import { FrontEnd } from "../../src/http/server.js";
import { IdGenerator } from "../../src/http/ids.js";
import { createLogger } from "../../src/logger.js";
import { emptyMetrics } from "../harness/metrics.js";
import { closeAgents, limit, post, request, TEST_KEY } from "../harness/http-client.js";

t.teardown(closeAgents);

const throwing: Decider = {
  decide() {
    throw new Error("boom: internal failure at /secret/path/decider.ts:42");
  },
  decideBatch() {
    throw new Error("boom: internal failure at /secret/path/batch.ts:42");
  },
  reset() {
    throw new Error("boom: internal failure at /secret/path/reset.ts:42");
  },
  release() {
    throw new Error("boom: internal failure at /secret/path/release.ts:42");
  },
};

async function serve(failOpen: boolean) {
  const metrics = emptyMetrics();
  const front = new FrontEnd(
    { host: "127.0.0.1", port: 0, failOpen },
    {
      decider: throwing,
      verifier: new ApiKeyVerifier([TEST_KEY], []),
      ids: new IdGenerator(),
      metrics,
      logger: createLogger("silent"),
      isReady: () => true,
      directory: new Directory("self", "http://127.0.0.1"),
    },
  );
  const { port } = await front.listen();
  return { url: `http://127.0.0.1:${port}`, front, metrics };
}

t.test("FAIL_OPEN=true: a throwing decision answers 200 degraded, counted as internal", async (t) => {
  const { url, front } = await serve(true);
  t.teardown(() => front.close());
  const r = await limit(url, { namespace: "ns", identifier: "u", limit: 10, duration: 60 });
  t.equal(r.status, 200);
  t.equal(r.json.data.degraded, true);
  t.equal(r.json.data.count, 1);
  t.equal(r.json.data.remaining, 9);
  t.notMatch(r.text, /boom|secret|\.ts:/, "nothing of the error reaches the client");
  const m = await request(url + "/metrics");
  t.match(m.text, /ringlimit_degraded_total\{reason="internal"\} 1/);
  const again = await limit(url, { namespace: "ns", identifier: "u", limit: 10, duration: 60 });
  t.equal(again.status, 200, "the node keeps serving");
});

t.test("FAIL_OPEN=false: a throwing decision answers an enveloped 500 without details", async (t) => {
  const { url, front } = await serve(false);
  t.teardown(() => front.close());
  const r = await limit(url, { namespace: "ns", identifier: "u", limit: 10, duration: 60 });
  t.equal(r.status, 500);
  t.equal(r.json.object, "error");
  t.equal(r.json.data.error, "Internal server error");
  t.equal(r.json.data.status, 500);
  t.match(r.json.id, /^err_/);
  t.notMatch(r.text, /boom|secret|\.ts:|at /, "no message or stack trace reaches the client");
});

t.test("a throwing batch fails open as a whole; a throwing reset is a 500", async (t) => {
  const { url, front } = await serve(true);
  t.teardown(() => front.close());
  const items = [
    { namespace: "ns", identifier: "u", limit: 10, duration: 60, cost: 3 },
    { namespace: "ns", identifier: "v", limit: 5, duration: 60 },
  ];
  const r = await post(url, "/limit/batch", { requests: items });
  t.equal(r.status, 200);
  t.equal(r.json.data.degraded, true);
  t.same(
    r.json.data.results.map((x: { degraded: boolean; remaining: number }) => [x.degraded, x.remaining]),
    [
      [true, 9],
      [true, 4],
    ],
  );
  t.notMatch(r.text, /boom|secret|\.ts:/);
  const reset = await post(url, "/limit/reset", { namespace: "ns", identifier: "u" });
  t.equal(reset.status, 500);
  t.notMatch(reset.text, /boom|secret|\.ts:/);
});

/**
 * GET /cluster on a single node (docs/client.md): behind the bearer keys, a ring of one
 * whose URL is where the node listens (or ADVERTISE_URL), and the ring version every
 * answer of POST /limit, /limit/batch and /limit/reset carries.
 */
import t from "tap";
import { AUTH_HEADER, closeAgents, limit, post, request } from "../harness/http-client.js";
import { startTestNode, useTestNode } from "../harness/in-process-node.js";

const node = useTestNode(t);
const body = { namespace: "cluster-route", identifier: "u1", limit: 1, duration: 60 };

t.test("without a valid key: 401, and no ring version", async (t) => {
  const cases: Record<string, string>[] = [{}, { authorization: "Bearer svc_sk_" + "x".repeat(40) }];
  for (const headers of cases) {
    const r = await request(node.url + "/cluster", { headers });
    t.equal(r.status, 401);
    t.equal(r.headers["www-authenticate"], "Bearer");
    t.equal(r.json.data.error, "Unauthorized");
    t.equal(r.headers["ringlimit-ring-version"], undefined);
  }
});

t.test("a single node: members = [itself] at the URL it listens on", async (t) => {
  const r = await request(node.url + "/cluster", { headers: AUTH_HEADER });
  t.equal(r.status, 200);
  t.equal(r.json.object, "cluster");
  t.match(r.json.data.ring_version, /^[0-9a-f]{16}$/);
  t.equal(r.headers["ringlimit-ring-version"], r.json.data.ring_version);
  t.same(r.json.data.members, [{ id: r.json.data.self, url: node.url, policy_version: "none" }], "no POLICY_PATH: version none");
});

t.test("every answer of POST /limit but a 401 carries the ring version", async (t) => {
  const version = (await request(node.url + "/cluster", { headers: AUTH_HEADER })).json.data.ring_version;
  const allowed = await limit(node.url, body);
  const blocked = await limit(node.url, body);
  const invalid = await limit(node.url, { ...body, limit: 0 });
  const unauthorized = await limit(node.url, body, { authorization: "Bearer nope" });
  t.same(
    [allowed, blocked, invalid].map((r) => [r.status, r.headers["ringlimit-ring-version"]]),
    [
      [200, version],
      [429, version],
      [400, version],
    ],
  );
  t.equal(unauthorized.status, 401);
  t.equal(unauthorized.headers["ringlimit-ring-version"], undefined);
});

t.test("batch and reset answers carry the ring version too", async (t) => {
  const version = (await request(node.url + "/cluster", { headers: AUTH_HEADER })).json.data.ring_version;
  const item = { ...body, identifier: "batch-u1", algorithm: "token-bucket" };
  const allowed = await post(node.url, "/limit/batch", { requests: [item] });
  const blocked = await post(node.url, "/limit/batch", { requests: [item] });
  const invalid = await post(node.url, "/limit/batch", { requests: [] });
  const reset = await post(node.url, "/limit/reset", { namespace: body.namespace, identifier: "batch-u1" });
  t.same(
    [allowed, blocked, invalid, reset].map((r) => [r.status, r.headers["ringlimit-ring-version"]]),
    [
      [200, version],
      [429, version],
      [400, version],
      [200, version],
    ],
  );
  t.equal(blocked.headers["retry-after"], "60", "beside Retry-After (one token per 60 s)");
  t.equal(allowed.headers["ratelimit"], undefined, "no RateLimit headers on a batch: it has several policies");
});

t.test("methods other than GET: 405 with Allow: GET", async (t) => {
  const r = await request(node.url + "/cluster", { method: "POST", headers: AUTH_HEADER });
  t.equal(r.status, 405);
  t.equal(r.headers.allow, "GET");
});

t.test("ADVERTISE_URL is what clients are told, and it changes the version", async (t) => {
  const other = await startTestNode({ ADVERTISE_URL: "https://ringlimit.example:443/" });
  t.teardown(() => other.stop());
  const r = await request(other.url + "/cluster", { headers: AUTH_HEADER });
  t.same(
    r.json.data.members.map((m: { url: string }) => m.url),
    ["https://ringlimit.example:443/"],
  );
  const mine = (await request(node.url + "/cluster", { headers: AUTH_HEADER })).json.data.ring_version;
  t.not(r.json.data.ring_version, mine);
});

t.teardown(closeAgents);

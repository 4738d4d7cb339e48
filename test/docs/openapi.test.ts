/**
 * docs/openapi.yaml against a real node: every documented status of POST /limit (200,
 * 400, 401, 404, 405, 413, 415, 429), GET /cluster, /health and /ready is provoked on a
 * real uWS listener, and the body is validated with ajv against the schema the document
 * gives for that path, method and status (additionalProperties: false, so an undocumented
 * field fails too), and the documented headers against their schemas.
 */
import { readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import t, { type Test } from "tap";
import { parse } from "yaml";
import { AUTH_HEADER, limit, post, type Reply, request, TEST_KEY } from "../harness/http-client.js";
import { useTestNode } from "../harness/in-process-node.js";
import { clearOfWindowEnd } from "../harness/contract.js";
import { ALGORITHM_NAMES } from "../../src/algorithms/index.js";

// ajv-formats is CommonJS with a default export.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

interface Schema {
  [key: string]: unknown;
}
interface OpenApi {
  openapi: string;
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: Schema }>; headers?: Record<string, Schema> }> }>>;
  components: { schemas: Record<string, Schema>; headers: Record<string, Schema> };
}

const doc = parse(readFileSync(new URL("../../../docs/openapi.yaml", import.meta.url), "utf8")) as OpenApi;
// The document's refs (#/components/schemas/X) become refs into one registered schema
// whose $defs are the document's component schemas.
const relocate = (schema: unknown): Schema => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"openapi.yaml#/$defs/')) as Schema;
const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats(ajv);
ajv.addSchema(relocate({ $id: "openapi.yaml", $defs: doc.components.schemas }));

function resolveHeader(h: Schema): Schema {
  const ref = h.$ref as string | undefined;
  return ref === undefined ? h : doc.components.headers[ref.split("/").pop()!]!;
}

/** Validate a reply against the document's response for (path, method, status). */
function conforms(t: Test, path: string, method: string, reply: Reply, contentType = "application/json"): void {
  const response = doc.paths[path]?.[method]?.responses[String(reply.status)];
  if (response === undefined) return void t.fail(`${method.toUpperCase()} ${path} ${reply.status} is not documented`);
  const schema = response.content?.[contentType]?.schema;
  t.ok(schema, `a ${contentType} schema for ${reply.status}`);
  const validate = ajv.compile(relocate(schema));
  t.ok(validate(reply.json), `${method.toUpperCase()} ${path} ${reply.status} body conforms: ${ajv.errorsText(validate.errors)} in ${reply.text}`);
  for (const [name, header] of Object.entries(response.headers ?? {})) {
    const value = reply.headers[name.toLowerCase()];
    t.ok(value !== undefined, `${reply.status} carries ${name}`);
    const headerSchema = relocate(resolveHeader(header).schema);
    const checkHeader = ajv.compile(headerSchema);
    const typed = (headerSchema as { type?: string }).type === "integer" ? Number(value) : value;
    t.ok(checkHeader(typed), `${name}: ${String(value)} conforms: ${ajv.errorsText(checkHeader.errors)}`);
  }
}

t.equal(doc.openapi, "3.1.0", "OpenAPI 3.1");

// A second key, scoped to namespaces starting "elsewhere.", for the 403s.
const SCOPED_KEY = "svc_sk_" + "s".repeat(40);
const node = useTestNode(t, { API_KEYS: `${TEST_KEY},${SCOPED_KEY}@elsewhere.` });
const body = (extra: Record<string, unknown> = {}) => ({ namespace: "docs", identifier: "openapi", limit: 1, duration: 60, ...extra });

t.test("POST /limit: 200 and 429 (with product and every algorithm)", async (t) => {
  for (const algorithm of ALGORITHM_NAMES) {
    const first = await limit(node.url, body({ algorithm, product: "Café Pro!", identifier: `id-${algorithm}` }));
    t.equal(first.status, 200);
    conforms(t, "/limit", "post", first);
    const second = await limit(node.url, body({ algorithm, product: "Café Pro!", identifier: `id-${algorithm}` }));
    t.equal(second.status, 429);
    conforms(t, "/limit", "post", second);
  }
});

t.test("POST /limit: 400, 401, 405, 413, 415; 404 elsewhere", async (t) => {
  const json = { ...AUTH_HEADER, "content-type": "application/json" };
  const replies: [string, string, Reply][] = [
    ["/limit", "post", await request(node.url + "/limit", { method: "POST", headers: json, body: "{not json" })],
    ["/limit", "post", await request(node.url + "/limit", { method: "POST", headers: json, body: "[1]" })],
    ["/limit", "post", await limit(node.url, body({ limit: 0, duration: "60", algorithm: "nope", namespace: "" }))],
    ["/limit", "post", await limit(node.url, { identifier: "x" })],
    ["/limit", "post", await limit(node.url, body({ product: "!!!" }))],
    ["/limit", "post", await request(node.url + "/limit", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body()) })],
    ["/limit", "post", await limit(node.url, body(), { authorization: "Bearer svc_sk_" + "x".repeat(40) })],
    ["/limit", "post", await request(node.url + "/limit", { method: "GET", headers: AUTH_HEADER })],
    ["/limit", "post", await limit(node.url, { ...body(), pad: "x".repeat(17 * 1024) })],
    [
      "/limit",
      "post",
      await request(node.url + "/limit", { method: "POST", headers: { ...AUTH_HEADER, "content-type": "text/plain" }, body: JSON.stringify(body()) }),
    ],
    ["/{path}", "get", await request(node.url + "/no-such-path", { headers: AUTH_HEADER })],
  ];
  t.same(
    replies.map(([, , r]) => r.status),
    [400, 400, 400, 400, 400, 401, 401, 405, 413, 415, 404],
  );
  for (const [path, method, reply] of replies) conforms(t, path, method, reply);
});

t.test("403: a key scoped to other namespaces, on each POST endpoint", async (t) => {
  const scoped = { authorization: `Bearer ${SCOPED_KEY}` };
  const replies: [string, Reply][] = [
    ["/limit", await limit(node.url, body(), scoped)],
    ["/limit/batch", await post(node.url, "/limit/batch", { requests: [body()] }, scoped)],
    ["/limit/reset", await post(node.url, "/limit/reset", { namespace: "docs", identifier: "openapi" }, scoped)],
  ];
  t.same(
    replies.map(([, r]) => r.status),
    [403, 403, 403],
  );
  for (const [path, reply] of replies) conforms(t, path, "post", reply);
});

t.test("GET /cluster, /health, /ready", async (t) => {
  conforms(t, "/cluster", "get", await request(node.url + "/cluster", { headers: AUTH_HEADER }));
  conforms(t, "/cluster", "get", await request(node.url + "/cluster"));
  conforms(t, "/health", "get", await request(node.url + "/health"));
  conforms(t, "/ready", "get", await request(node.url + "/ready"));
});

t.test("the document's schemas are strict enough to catch drift", async (t) => {
  const allowed = await limit(node.url, body({ identifier: "drift" }));
  const validate = ajv.compile(relocate({ $ref: "#/components/schemas/AllowedEnvelope" }));
  t.ok(validate(allowed.json), "the real body passes");
  t.notOk(validate({ ...allowed.json, extra: 1 }), "an undocumented field fails");
  t.notOk(validate({ ...allowed.json, data: { ...allowed.json.data, remaining: -1 } }), "a bound is checked");
  const { count: _count, ...withoutCount } = allowed.json.data;
  t.notOk(validate({ ...allowed.json, data: withoutCount }), "a missing required field fails");
});

t.test("POST /limit/batch: 200, 429, 400, 405; POST /limit/reset: 200, 400", async (t) => {
  const item = (identifier: string, extra: Record<string, unknown> = {}) => ({ namespace: "docs", identifier, limit: 2, duration: 60, ...extra });
  const ok = await post(node.url, "/limit/batch", { requests: [item("b1", { cost: 2 }), item("b2", { algorithm: "token-bucket", product: "Café" })] });
  t.equal(ok.status, 200);
  conforms(t, "/limit/batch", "post", ok);
  const refused = await post(node.url, "/limit/batch", { requests: [item("b2", { algorithm: "token-bucket", product: "Café" }), item("b1")] });
  t.equal(refused.status, 429);
  conforms(t, "/limit/batch", "post", refused);
  const bad = await post(node.url, "/limit/batch", { requests: [item("b3"), item("b4", { limit: 0, cost: -1 })] });
  t.equal(bad.status, 400);
  conforms(t, "/limit/batch", "post", bad);
  const none = await post(node.url, "/limit/batch", { requests: [] });
  t.equal(none.status, 400);
  conforms(t, "/limit/batch", "post", none);
  const method = await request(node.url + "/limit/batch", { headers: AUTH_HEADER });
  t.equal(method.status, 405);
  conforms(t, "/limit/batch", "post", method);
  const reset = await post(node.url, "/limit/reset", { namespace: "docs", identifier: "b1" });
  t.equal(reset.status, 200);
  t.equal(reset.json.data.removed.length, 1);
  conforms(t, "/limit/reset", "post", reset);
  const badReset = await post(node.url, "/limit/reset", { namespace: "docs", identifier: "b1", duration: 0 });
  t.equal(badReset.status, 400);
  conforms(t, "/limit/reset", "post", badReset);
});

t.test("POST /limit/charge: 200 (in debt and refunded), 400", async (t) => {
  const key = { namespace: "docs", identifier: "charged", limit: 10, duration: 3600 };
  const debt = await post(node.url, "/limit/charge", { ...key, cost: 25 });
  t.equal(debt.status, 200);
  t.equal(debt.json.data.debt, 15);
  conforms(t, "/limit/charge", "post", debt);
  const refund = await post(node.url, "/limit/charge", { ...key, cost: -20, algorithm: "fixed-window" });
  t.equal(refund.status, 200);
  conforms(t, "/limit/charge", "post", refund);
  const bad = await post(node.url, "/limit/charge", { ...key, cost: 0 });
  t.equal(bad.status, 400);
  conforms(t, "/limit/charge", "post", bad);
});

t.test("concurrency: POST /limit 200 with a lease and 429; POST /limit/release 200, renewed 200, 400, 405; a batch's lease", async (t) => {
  const key = { namespace: "docs", identifier: "conc", limit: 1, duration: 60, algorithm: "concurrency" };
  const held = await limit(node.url, key);
  t.equal(held.status, 200);
  t.type(held.json.data.lease, "string");
  conforms(t, "/limit", "post", held);
  const full = await limit(node.url, key);
  t.equal(full.status, 429);
  conforms(t, "/limit", "post", full);
  const renewed = await post(node.url, "/limit/release", { ...key, lease: held.json.data.lease, renew: true });
  t.equal(renewed.json.data.released, true);
  conforms(t, "/limit/release", "post", renewed);
  const released = await post(node.url, "/limit/release", { ...key, lease: renewed.json.data.lease });
  t.equal(released.json.data.released, true);
  conforms(t, "/limit/release", "post", released);
  const bad = await post(node.url, "/limit/release", { ...key, lease: "x".repeat(129) });
  t.equal(bad.status, 400);
  conforms(t, "/limit/release", "post", bad);
  const method = await request(node.url + "/limit/release", { headers: AUTH_HEADER });
  t.equal(method.status, 405);
  conforms(t, "/limit/release", "post", method);
  const batch = await post(node.url, "/limit/batch", { requests: [{ ...key, identifier: "conc-batch" }] });
  t.type(batch.json.data.results[0].lease, "string");
  conforms(t, "/limit/batch", "post", batch);
});

t.test("POST /json: 200, 429, 400, 401, 403, 405", async (t) => {
  // No POLICY_PATH on this node: a descriptor's own limit is what it is counted against.
  const call = (hitsAddend: number | string) => ({
    domain: "docs",
    hitsAddend,
    descriptors: [{ entries: [{ key: "user", value: "openapi" }], limit: { requestsPerUnit: 2, unit: "HOUR" } }, { entries: [{ key: "none", value: "x" }] }],
  });
  await clearOfWindowEnd(3600, 20_000);
  const ok = await post(node.url, "/json", call("2"));
  t.equal(ok.status, 200);
  t.equal(ok.json.statuses[0].currentLimit.requestsPerUnit, 2);
  conforms(t, "/json", "post", ok);
  const over = await post(node.url, "/json", call(1));
  t.equal(over.status, 429);
  t.equal(over.json.overallCode, "OVER_LIMIT");
  conforms(t, "/json", "post", over);
  const replies: Reply[] = [
    await post(node.url, "/json", { domain: "docs", descriptors: [{ entries: [{ key: "" }] }] }),
    await post(node.url, "/json", { domain: "docs", descriptors: [], unknown: true }),
    await post(node.url, "/json", call(1), { authorization: "Bearer svc_sk_" + "x".repeat(40) }),
    await post(node.url, "/json", call(1), { authorization: `Bearer ${SCOPED_KEY}` }),
    await request(node.url + "/json", { headers: AUTH_HEADER }),
  ];
  t.same(
    replies.map((r) => r.status),
    [400, 400, 401, 403, 405],
  );
  for (const reply of replies) conforms(t, "/json", "post", reply);
  const validate = ajv.compile(relocate({ $ref: "#/components/schemas/RlsResponse" }));
  t.notOk(validate({ ...ok.json, overall_code: "OK" }), "a .proto name in an answer fails");
});

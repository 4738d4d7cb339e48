/**
 * Statuses other than 200/429 over a real listener: the check order (route → auth →
 * Content-Type → size → JSON → fields), Authorization and Content-Type variants, the
 * 16 KiB cap (declared and chunked), 404/405, health, readiness and metrics.
 */
import http from "node:http";
import t, { type Test } from "tap";
import { limit, request, TEST_KEY, type Reply } from "../harness/http-client.js";
import { startTestNode, useTestNode } from "../harness/in-process-node.js";
import { envelopeProblems, leakProblems, paddedBody, show, uniqueId, validBody } from "../harness/contract.js";
import { sleep } from "../harness/wait.js";

const node = useTestNode(t);

const AUTH = `Bearer ${TEST_KEY}`;
const JSON_CT = "application/json";

/** POST with exactly these headers (no key or content type added). */
function postRaw(headers: Record<string, string>, body: string | Buffer = JSON.stringify(validBody()), path = "/limit"): Promise<Reply> {
  return request(node.url + path, { method: "POST", headers, body });
}

function isError(t: Test, r: Reply, status: number, text: string, what: string): void {
  t.equal(r.status, status, `${what}: ${status} (${show(r.text.slice(0, 200))})`);
  t.same(envelopeProblems(r, "error"), [], `${what}: error envelope`);
  t.equal(r.json?.data?.error, text, `${what}: data.error`);
  t.equal(r.json?.data?.status, status, `${what}: data.status`);
  t.same(leakProblems(r.text), [], `${what}: no internals`);
}

t.test("check order: route → auth → Content-Type → size → JSON → fields", async (t) => {
  const huge = "x".repeat(20_000);
  isError(t, await postRaw({}, huge, "/nope"), 404, "Not Found", "unknown path, no auth");
  isError(t, await request(node.url + "/limit", { method: "GET" }), 405, "Method Not Allowed", "wrong method, no auth");
  isError(t, await postRaw({ "content-type": "text/plain" }), 401, "Unauthorized", "no auth + wrong type");
  isError(
    t,
    await postRaw({ authorization: "Bearer svc_sk_wrongwrongwrongwrongwrongwrongwrong" }, huge),
    401,
    "Unauthorized",
    "wrong key + no type + huge body",
  );
  isError(t, await postRaw({ authorization: AUTH, "content-type": "text/plain" }, huge), 415, "Unsupported Media Type", "good auth + wrong type + huge body");
  isError(t, await postRaw({ authorization: AUTH, "content-type": JSON_CT }, "{" + huge), 413, "Payload Too Large", "good auth + type + huge invalid JSON");
  const badJson = await postRaw({ authorization: AUTH, "content-type": JSON_CT }, '{"limit": "x", oops');
  isError(t, badJson, 400, "Bad Request", "invalid JSON with bad fields");
  t.same(
    badJson.json.data.details.map((d: { field: string }) => d.field),
    ["body"],
    "JSON error reported, not field errors",
  );
  const badField = await postRaw({ authorization: AUTH, "content-type": JSON_CT }, JSON.stringify(validBody({ limit: "x" })));
  isError(t, badField, 400, "Bad Request", "valid JSON, bad field");
  t.same(
    badField.json.data.details.map((d: { field: string }) => d.field),
    ["limit"],
  );
});

t.test("Authorization variants", async (t) => {
  const accepted = [`Bearer ${TEST_KEY}`, `bearer ${TEST_KEY}`, `BEARER ${TEST_KEY}`, `bEaReR ${TEST_KEY}`];
  for (const value of accepted) {
    const r = await postRaw({ authorization: value, "content-type": JSON_CT });
    t.equal(r.status, 200, `accepted: ${value.slice(0, 12)}…`);
  }
  const rejected: [string, string | undefined][] = [
    ["missing", undefined],
    ["empty", ""],
    ["Basic", `Basic ${Buffer.from(`user:${TEST_KEY}`).toString("base64")}`],
    ["Basic with the key", `Basic ${TEST_KEY}`],
    ["no scheme", TEST_KEY],
    ["scheme only", "Bearer"],
    ["scheme and space", "Bearer "],
    ["Token scheme", `Token ${TEST_KEY}`],
    ["Bearer without space", `Bearer${TEST_KEY}`],
    ["wrong key", "Bearer svc_sk_0000000000000000000000000000000000000000"],
    ["key + extra char", `Bearer ${TEST_KEY}x`],
    ["key − last char", `Bearer ${TEST_KEY.slice(0, -1)}`],
    ["key, other case", `Bearer ${TEST_KEY.toUpperCase()}`],
    ["key without prefix", `Bearer ${TEST_KEY.slice("svc_sk_".length)}`],
    ["two tokens", `Bearer ${TEST_KEY} ${TEST_KEY}`],
    ["key twice joined", `Bearer ${TEST_KEY}${TEST_KEY}`],
    ["Bearer2", `Bearer2 ${TEST_KEY}`],
  ];
  for (const [what, value] of rejected) {
    const headers: Record<string, string> = { "content-type": JSON_CT };
    if (value !== undefined) headers.authorization = value;
    const r = await postRaw(headers);
    isError(t, r, 401, "Unauthorized", what);
    t.match(String(r.headers["www-authenticate"]), /^Bearer\b/, `${what}: WWW-Authenticate: Bearer (RFC 9110 §11.6.1)`);
    t.notOk(r.text.includes(TEST_KEY.slice(8, 30)), `${what}: key not echoed`);
  }
});

t.test("a rejected request is not counted", async (t) => {
  const body = validBody({ limit: 1 });
  isError(t, await postRaw({ authorization: "Bearer nope", "content-type": JSON_CT }, JSON.stringify(body)), 401, "Unauthorized", "401");
  isError(t, await postRaw({ authorization: AUTH, "content-type": "text/plain" }, JSON.stringify(body)), 415, "Unsupported Media Type", "415");
  const r = await limit(node.url, body);
  t.equal(r.status, 200);
  t.equal(r.json.data.count, 1);
});

t.test("Content-Type variants", async (t) => {
  for (const ct of [
    "application/json",
    "application/json; charset=utf-8",
    "application/json;charset=UTF-8",
    "Application/JSON",
    "APPLICATION/JSON; CHARSET=UTF-8",
    "application/json ; charset=utf-8",
  ]) {
    const r = await postRaw({ authorization: AUTH, "content-type": ct });
    t.equal(r.status, 200, `accepted: ${ct}`);
  }
  for (const ct of [
    undefined,
    "",
    "text/plain",
    "text/json",
    "application/jsonp",
    "application/json-seq",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/problem+json",
    "json",
    "*/*",
    "application/*",
  ]) {
    const headers: Record<string, string> = { authorization: AUTH };
    if (ct !== undefined) headers["content-type"] = ct;
    isError(t, await postRaw(headers), 415, "Unsupported Media Type", `content-type ${JSON.stringify(ct)}`);
  }
});

t.test("16 KiB body cap: declared length", async (t) => {
  const headers = { authorization: AUTH, "content-type": JSON_CT };
  const exact = paddedBody(16384, validBody({ limit: 3 }));
  t.equal(Buffer.byteLength(exact), 16384);
  const ok = await postRaw(headers, exact);
  t.equal(ok.status, 200, "16384 bytes is accepted");
  t.equal(ok.json.data.limit, 3);
  const multibyte = paddedBody(16384 - 3 * 1000, validBody({ identifier: uniqueId("é").padEnd(40, "é") }));
  t.equal((await postRaw(headers, multibyte)).status, 200, "byte length, not character length, counts");
  isError(t, await postRaw(headers, paddedBody(16385)), 413, "Payload Too Large", "16385 bytes");
  // a much larger body: the client must still read the answer, not a reset
  isError(t, await postRaw(headers, paddedBody(100_000)), 413, "Payload Too Large", "100 kB");
  // the node keeps serving new connections
  t.equal((await postRaw(headers)).status, 200, "still serving after 413s");
});

/** POST in pieces with Transfer-Encoding: chunked (no Content-Length). */
function chunkedPost(pieces: Buffer[], delayMs: number): Promise<{ status: number; text: string; writeError?: string; ms: number }> {
  const u = new URL(node.url + "/limit");
  const started = Date.now();
  return new Promise((resolve, reject) => {
    let writeError: string | undefined;
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error("no answer within 10 s: connection left hanging"));
    }, 10_000);
    const req = http.request(
      {
        hostname: u.hostname,
        port: u.port,
        path: u.pathname,
        method: "POST",
        agent: false,
        headers: { authorization: AUTH, "content-type": JSON_CT, "transfer-encoding": "chunked" },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, text, ...(writeError !== undefined ? { writeError } : {}), ms: Date.now() - started });
        });
        res.on("error", () => undefined);
      },
    );
    req.on("error", (err) => (writeError = err.message)); // EPIPE/ECONNRESET after an early answer is fine
    (async () => {
      for (const piece of pieces) {
        if (req.destroyed || req.writableEnded) return;
        req.write(piece);
        await sleep(delayMs);
      }
      if (!req.destroyed) req.end();
    })().catch(() => undefined);
  });
}

t.test("16 KiB body cap: chunked bodies", async (t) => {
  // under the cap, in 1 kB pieces: accepted
  const small = Buffer.from(paddedBody(12_000, validBody({ limit: 4 })));
  const smallPieces = Array.from({ length: Math.ceil(small.length / 1000) }, (_, i) => small.subarray(i * 1000, (i + 1) * 1000));
  const ok = await chunkedPost(smallPieces, 2);
  t.equal(ok.status, 200, `chunked 12 kB accepted (${ok.text.slice(0, 120)})`);
  t.equal(JSON.parse(ok.text).data.limit, 4);

  // exactly the cap, chunked
  const exact = Buffer.from(paddedBody(16384));
  const exactPieces = Array.from({ length: 17 }, (_, i) => exact.subarray(i * 1000, (i + 1) * 1000)).filter((p) => p.length > 0);
  t.equal((await chunkedPost(exactPieces, 1)).status, 200, "chunked 16384 bytes accepted");

  // over the cap: 40 pieces of 1 kB, slowly; the answer comes once 16 KiB is passed
  const piece = Buffer.alloc(1000, 0x20);
  const big = await chunkedPost([Buffer.from('{"pad":"'), ...Array.from({ length: 40 }, () => piece)], 20);
  t.equal(big.status, 413, `chunked 40 kB → 413 (${big.text.slice(0, 120)})`);
  const j = JSON.parse(big.text);
  t.equal(j.object, "error");
  t.equal(j.data.error, "Payload Too Large");
  t.match(j.id, /^err_/);
  t.ok(big.ms < 40 * 20 + 2000, `answered without waiting for the whole upload to finish (${big.ms} ms)`);
  t.equal((await limit(node.url, validBody())).status, 200, "still serving");
});

t.test("404 for unknown paths, 405 with Allow: POST for other methods on /limit", async (t) => {
  for (const [method, path] of [
    ["GET", "/"],
    ["POST", "/"],
    ["GET", "/nope"],
    ["POST", "/limits"],
    ["POST", "/limit/x"],
    ["POST", "/LIMIT"],
    ["POST", "/v1/limit"],
    ["GET", "/health/x"],
  ] as const) {
    const r = await request(node.url + path, {
      method,
      headers: { authorization: AUTH, "content-type": JSON_CT },
      body: method === "POST" ? "{}" : (undefined as unknown as string),
    });
    isError(t, r, 404, "Not Found", `${method} ${path}`);
  }
  for (const method of ["GET", "PUT", "DELETE", "PATCH", "OPTIONS"]) {
    const r = await request(node.url + "/limit", {
      method,
      headers: { authorization: AUTH, "content-type": JSON_CT },
      ...(method === "PUT" || method === "PATCH" ? { body: JSON.stringify(validBody()) } : {}),
    });
    isError(t, r, 405, "Method Not Allowed", `${method} /limit`);
    t.equal(r.headers["allow"], "POST", `${method}: Allow: POST`);
  }
});

t.test("a query string does not change the route", async (t) => {
  const r = await request(node.url + "/limit?debug=1", {
    method: "POST",
    headers: { authorization: AUTH, "content-type": JSON_CT },
    body: JSON.stringify(validBody()),
  });
  t.equal(r.status, 200);
});

t.test("/health and /ready answer 200 without auth", async (t) => {
  const h = await request(node.url + "/health");
  t.equal(h.status, 200);
  t.equal(h.json?.status, "ok");
  const r = await request(node.url + "/ready");
  t.equal(r.status, 200);
  t.equal(r.json?.status, "ready");
});

/** Value of one sample line in Prometheus text, 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m === null || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v) && Object.keys(have).length === Object.keys(labels).length) return Number(m[3]);
  }
  return 0;
}

t.test("/metrics: names, default process metrics, and counts that move", async (t) => {
  const m0 = await request(node.url + "/metrics");
  t.equal(m0.status, 200);
  t.match(String(m0.headers["content-type"]), /^text\/plain/);
  for (const name of [
    "ringlimit_requests_total",
    "ringlimit_decision_seconds",
    "ringlimit_stored_keys",
    "ringlimit_evictions_total",
    "ringlimit_degraded_total",
    "process_cpu_seconds_total",
    "nodejs_heap_size_total_bytes",
  ]) {
    t.match(m0.text, new RegExp(`^# TYPE ${name} `, "m"), `has ${name}`);
  }
  const before = m0.text;
  const body = validBody({ algorithm: "token-bucket", limit: 3 });
  for (let i = 0; i < 5; i++) await limit(node.url, body); // 3 × 200, 2 × 429
  await postRaw({ authorization: "Bearer nope", "content-type": JSON_CT }); // 401
  await postRaw({ authorization: AUTH, "content-type": JSON_CT }, "{"); // 400
  await postRaw({ authorization: AUTH, "content-type": "text/plain" }); // 415
  await limit(node.url, validBody({ algorithm: "leaky-bucket" })); // new key
  const after = (await request(node.url + "/metrics")).text;
  const delta = (name: string, labels: Record<string, string> = {}) => sample(after, name, labels) - sample(before, name, labels);
  t.equal(delta("ringlimit_requests_total", { status: "200", algorithm: "token-bucket" }), 3);
  t.equal(delta("ringlimit_requests_total", { status: "429", algorithm: "token-bucket" }), 2);
  t.equal(delta("ringlimit_requests_total", { status: "200", algorithm: "leaky-bucket" }), 1);
  t.equal(delta("ringlimit_requests_total", { status: "401", algorithm: "none" }), 1);
  t.equal(delta("ringlimit_requests_total", { status: "400", algorithm: "none" }), 1);
  t.equal(delta("ringlimit_requests_total", { status: "415", algorithm: "none" }), 1);
  t.equal(delta("ringlimit_decision_seconds_count"), 6, "one latency sample per decision");
  t.equal(delta("ringlimit_stored_keys"), 2, "two new keys stored");
  t.equal(sample(after, "ringlimit_stored_keys"), node.node.table.size);
  t.equal(delta("ringlimit_evictions_total"), 0);
  t.equal(sample(after, "ringlimit_degraded_total", { reason: "internal" }), 0, "no fail-open answers");
});

t.test("METRICS_PORT moves /metrics to its own port", async (t) => {
  const other = await startTestNode({ METRICS_PORT: "0" });
  t.teardown(() => other.stop());
  const port = other.node.metricsPort;
  t.ok(port !== undefined && port > 0 && port !== other.node.port, `admin port ${port}`);
  isError(t, await request(other.url + "/metrics"), 404, "Not Found", "/metrics on the main port");
  const m = await request(`http://127.0.0.1:${port}/metrics`);
  t.equal(m.status, 200);
  t.match(m.text, /^# TYPE ringlimit_requests_total counter/m);
  t.equal((await request(`http://127.0.0.1:${port}/nope`)).status, 404);
  t.same((await request(`http://127.0.0.1:${port}/health`)).json, { status: "ok" }, "/health on the admin port too (probes)");
  t.same((await request(`http://127.0.0.1:${port}/ready`)).json, { status: "ready" }, "/ready on the admin port too (probes)");
  t.equal(
    (await request(`http://127.0.0.1:${port}/limit`, { method: "POST", headers: { authorization: AUTH, "content-type": JSON_CT }, body: "{}" })).status,
    404,
    "no /limit on the admin port",
  );
  t.equal((await limit(other.url, validBody())).status, 200, "main port still decides");
  t.equal((await request(other.url + "/health")).status, 200);
});

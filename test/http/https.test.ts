/**
 * HTTPS through SSLApp: a self-signed certificate made in JavaScript (selfsigned) for this run,
 * a node with TLS_CERT_FILE/TLS_KEY_FILE, POST /limit over TLS (verified against that
 * certificate), and plain HTTP on the TLS port gets no answer that looks like a decision.
 */
import { X509Certificate } from "node:crypto";
import http from "node:http";
import https from "node:https";
import tls from "node:tls";
import t from "tap";
import { closeAgents, limit, request, TEST_KEY } from "../harness/http-client.js";
import { startTestNode, type TestNode } from "../harness/in-process-node.js";
import { selfSignedCert } from "../harness/certs.js";
import { envelopeProblems, validBody } from "../harness/contract.js";

const { cert: certPem, certFile, keyFile } = await selfSignedCert(t, { commonName: "127.0.0.1", ip: "127.0.0.1" });
const fingerprint = new X509Certificate(certPem).fingerprint256;

let node: TestNode;
t.before(async () => {
  node = await startTestNode({ TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile });
});
t.teardown(async () => {
  await node?.stop();
  closeAgents();
});

t.test("the node serves TLS with the certificate it was given", async (t) => {
  t.match(node.url, /^https:\/\/127\.0\.0\.1:\d+$/);
  const port = Number(new URL(node.url).port);
  const peer = await new Promise<tls.PeerCertificate>((resolve, reject) => {
    const socket = tls.connect({ host: "127.0.0.1", port, ca: certPem }, () => {
      const cert = socket.getPeerCertificate();
      t.ok(socket.authorized, `verified against the generated certificate (${socket.authorizationError ?? "ok"})`);
      socket.end();
      resolve(cert);
    });
    socket.on("error", reject);
  });
  t.equal(peer.fingerprint256, fingerprint, "same certificate");
  t.equal(peer.subject.CN, "127.0.0.1");
});

t.test("POST /limit over HTTPS: 200 then 429, with a verifying client", async (t) => {
  const body = JSON.stringify(validBody({ limit: 1, duration: 3600 }));
  const post = () =>
    new Promise<{ status: number; text: string; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
      const u = new URL(node.url + "/limit");
      const req = https.request(
        {
          hostname: u.hostname,
          port: u.port,
          path: u.pathname,
          method: "POST",
          ca: certPem,
          agent: false,
          headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" },
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (c: string) => (text += c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text, headers: res.headers }));
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  const a = await post();
  t.equal(a.status, 200);
  const ja = JSON.parse(a.text);
  t.equal(ja.object, "rate_limit");
  t.equal(ja.data.count, 1);
  t.equal(a.headers["ratelimit-policy"], '"fixed-window";q=1;w=3600');
  const b = await post();
  t.equal(b.status, 429);
  const jb = JSON.parse(b.text);
  t.equal(jb.data.error, "Rate limit exceeded");
  t.ok(Number(b.headers["retry-after"]) >= 1);
});

t.test("the rest of the contract over TLS (keep-alive client)", async (t) => {
  const r = await limit(node.url, validBody());
  t.equal(r.status, 200);
  t.same(envelopeProblems(r, "rate_limit"), []);
  t.equal((await limit(node.url, validBody(), { authorization: "Bearer nope" })).status, 401);
  t.equal((await limit(node.url, validBody(), { "content-type": "text/plain" })).status, 415);
  t.equal((await limit(node.url, "{")).status, 400);
  t.equal((await request(node.url + "/health")).status, 200);
  t.equal((await request(node.url + "/ready")).status, 200);
});

t.test("plain HTTP to the TLS port gets no 200", async (t) => {
  const port = new URL(node.url).port;
  const outcome = await new Promise<string>((resolve) => {
    const req = http.request(
      {
        hostname: "127.0.0.1",
        port,
        path: "/limit",
        method: "POST",
        agent: false,
        timeout: 3000,
        headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(`status ${res.statusCode}`));
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (err) => resolve(`error ${err.message}`));
    req.end(JSON.stringify(validBody()));
  });
  t.notMatch(outcome, /^status 2/, `plain HTTP: ${outcome}`);
  // and the TLS listener is unharmed
  t.equal((await limit(node.url, validBody())).status, 200);
});

t.test("with TLS on, METRICS_PORT serves /metrics, /health and /ready over plain HTTP (Kubernetes probes)", async (t) => {
  const admin = await startTestNode({ TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile, METRICS_PORT: "0" });
  t.teardown(() => admin.stop());
  const port = admin.node.metricsPort!;
  t.equal((await request(`http://127.0.0.1:${port}/health`)).status, 200, "/health over plain HTTP");
  t.same((await request(`http://127.0.0.1:${port}/ready`)).json, { status: "ready" }, "/ready over plain HTTP");
  t.match((await request(`http://127.0.0.1:${port}/metrics`)).text, /^# TYPE ringlimit_requests_total counter/m);
  t.match(admin.url, /^https:/, "the main port is still TLS");
});

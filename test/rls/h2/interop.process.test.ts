/**
 * Clients that are not ours against ringlimit's own HTTP/2 (GRPC_SERVER_IMPL=ringlimit):
 * node:http2 (nghttp2) with far more than 64 KiB of bodies on one connection, plaintext and
 * TLS with ALPN h2; curl --http2-prior-knowledge; nghttp and h2load (Debian nghttp2-client),
 * each skipped when the tool is missing. @grpc/grpc-js runs the RLS suites (test/rls/).
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import http2, { type ClientHttp2Session } from "node:http2";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { selfSignedCert } from "../../harness/certs.js";
import { TEST_KEY } from "../../harness/http-client.js";
import { spawnNode } from "../../harness/node-process.js";
import { freePort } from "../../harness/ports.js";
import { CHECK_PATH, grpcMessage } from "./raw-h2.js";

const RLS_PATH = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
const SERVING = [0, 0, 0, 0, 2, 0x08, 0x01];

async function grpcPort(t: Test, env: Record<string, string> = {}): Promise<number> {
  const port = await freePort();
  const node = await spawnNode({ GRPC_PORT: String(port), GRPC_SERVER_IMPL: "ringlimit", ...env });
  t.teardown(() => node.kill());
  return port;
}

// --- a RateLimitRequest by hand: domain, one descriptor user=<value> with its own limit per DAY ---
const varint = (n: number): Buffer => {
  const out: number[] = [];
  while (n > 127) {
    out.push((n & 127) | 128);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
};
const field = (n: number, bytes: Buffer): Buffer => Buffer.concat([varint((n << 3) | 2), varint(bytes.length), bytes]);
const uint = (n: number, v: number): Buffer => Buffer.concat([varint(n << 3), varint(v)]);
function rlsRequest(domain: string, value: string, limit: number): Buffer {
  const entry = field(1, Buffer.concat([field(1, Buffer.from("user")), field(2, Buffer.from(value))]));
  const descriptor = field(2, Buffer.concat([entry, field(2, Buffer.concat([uint(1, limit), uint(2, 4)]))]));
  return grpcMessage(Buffer.concat([field(1, Buffer.from(domain)), descriptor]));
}

/** One unary call on `session`: the body back, and grpc-status. */
function call(session: ClientHttp2Session, path: string, body: Buffer): Promise<{ body: Buffer; status: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", authorization: `Bearer ${TEST_KEY}` });
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("error", reject);
    req.on("trailers", (trailers) => resolve({ body: Buffer.concat(chunks), status: trailers["grpc-status"] as string | undefined }));
    req.end(body);
  });
}

function tool(name: string): boolean {
  try {
    execFileSync(name, ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

t.test("node:http2: 400 calls of 2 KiB on one connection (800 KiB of bodies), 50 at a time, each counted once", async (t) => {
  const port = await grpcPort(t);
  const session = http2.connect(`http://127.0.0.1:${port}`);
  t.teardown(() => session.close());
  const value = "v".repeat(2000);
  for (let batch = 0; batch < 8; batch++) {
    const answers = await Promise.all(Array.from({ length: 50 }, () => call(session, RLS_PATH, rlsRequest("interop", value, 1000))));
    for (const a of answers) if (a.status !== "0") t.fail(`grpc-status ${a.status}`);
  }
  // the 401st call sees 400 counted: limit_remaining 599 (field 3 of the status, after code OK and current_limit)
  const last = await call(session, RLS_PATH, rlsRequest("interop", value, 1000));
  t.equal(last.status, "0");
  t.ok(last.body.includes(Buffer.from([0x18, ...varint(599)])), "limit_remaining 599: all 400 counted, none twice");
});

t.test("node:http2 over TLS (ALPN h2) with the node's TLS_CERT_FILE", async (t) => {
  const cert = await selfSignedCert(t, { commonName: "127.0.0.1", ip: "127.0.0.1" });
  const port = await grpcPort(t, { TLS_CERT_FILE: cert.certFile, TLS_KEY_FILE: cert.keyFile });
  const session = http2.connect(`https://127.0.0.1:${port}`, { ca: cert.cert });
  t.teardown(() => session.close());
  const answers = await Promise.all(Array.from({ length: 60 }, () => call(session, CHECK_PATH, grpcMessage())));
  t.ok(
    answers.every((a) => a.status === "0" && a.body.equals(Buffer.from(SERVING))),
    "60 health checks over TLS",
  );
  t.equal((session.socket as unknown as { alpnProtocol: string }).alpnProtocol, "h2");
});

t.test("curl --http2-prior-knowledge", { skip: tool("curl") ? false : "no curl" }, async (t) => {
  const port = await grpcPort(t);
  const file = path.join(tmpdir(), `ringlimit-h2-${process.pid}.bin`);
  writeFileSync(file, grpcMessage());
  // Synchronous: the node answering is another process.
  const out = execFileSync(
    "curl",
    [
      "-s",
      "--http2-prior-knowledge",
      "-H",
      "content-type: application/grpc",
      "-H",
      "te: trailers",
      "--data-binary",
      `@${file}`,
      `http://127.0.0.1:${port}${CHECK_PATH}`,
    ],
    { encoding: "buffer", timeout: 30_000 },
  );
  t.same([...out], SERVING);
});

t.test("nghttp and h2load (nghttp2-client)", { skip: tool("h2load") && tool("nghttp") ? false : "no nghttp2-client" }, async (t) => {
  const port = await grpcPort(t);
  const file = path.join(tmpdir(), `ringlimit-h2load-${process.pid}.bin`);
  writeFileSync(file, grpcMessage());
  const url = `http://127.0.0.1:${port}${CHECK_PATH}`;
  const headers = ["-H", "content-type: application/grpc", "-H", "te: trailers"];
  const nghttp = execFileSync("nghttp", ["-v", "-d", file, ...headers, url], { encoding: "latin1" });
  t.match(nghttp, /grpc-status: 0/, "nghttp sees grpc-status 0");
  const out = execFileSync("h2load", ["-n", "4000", "-c", "4", "-m", "50", "-d", file, ...headers, url], { encoding: "utf8" });
  t.match(out, /4000 succeeded, 0 failed, 0 errored/, "h2load: 4000 calls on 4 connections × 50 streams");
});

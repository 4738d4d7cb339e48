/**
 * Issue #41: client-certificate TLS on the gRPC port with either server, so that the own
 * HTTP/2 serves the port in every configuration (before, GRPC_SERVER_TLS_CA_CERT switched
 * the node to node:http2). A real node, real TLS: a caller with a certificate from the CA is
 * served without an API key; one without a certificate, or with another CA's, never reaches
 * a call; GRPC_CLIENT_TLS_SAN refuses a certificate without the name.
 */
import http2 from "node:http2";
import t, { type Test } from "tap";
import { selfSignedCert, type CertFiles } from "../../harness/certs.js";
import { spawnNode } from "../../harness/node-process.js";
import { freePort } from "../../harness/ports.js";

const CHECK = "/grpc.health.v1.Health/Check";

/** A health Check over TLS with `client`'s certificate (or none): its grpc-status, or how it failed. */
function check(port: number, ca: Buffer, client?: CertFiles): Promise<string> {
  return new Promise((resolve) => {
    const session = http2.connect(`https://127.0.0.1:${port}`, {
      ca,
      ...(client ? { cert: client.cert, key: client.key } : {}),
      checkServerIdentity: () => undefined,
    });
    const done = (why: string): void => {
      session.destroy();
      resolve(why);
    };
    session.on("error", (e) => done(`error: ${e.message}`));
    session.on("close", () => done("closed"));
    const stream = session.request({ ":method": "POST", ":path": CHECK, "content-type": "application/grpc", te: "trailers" });
    stream.on("error", (e) => done(`error: ${e.message}`));
    const take = (h: http2.IncomingHttpHeaders): void => {
      if (h["grpc-status"] !== undefined) done(`grpc-status ${h["grpc-status"]}`);
    };
    stream.on("response", take);
    stream.on("trailers", take);
    stream.end(Buffer.alloc(5));
  });
}

/** The body of a GET / (not a gRPC call: 415). */
function plainGet(port: number, ca: Buffer, client: CertFiles): Promise<string> {
  return new Promise((resolve) => {
    const session = http2.connect(`https://127.0.0.1:${port}`, { ca, cert: client.cert, key: client.key, checkServerIdentity: () => undefined });
    session.on("error", () => resolve(""));
    let body = "";
    const stream = session.request({ ":method": "GET", ":path": "/" });
    stream.on("data", (c: Buffer) => (body += c.toString()));
    stream.on("error", () => {});
    stream.on("close", () => {
      session.destroy();
      resolve(body);
    });
    stream.end();
  });
}

async function node(t: Test, impl: string, env: Record<string, string>): Promise<number> {
  const port = await freePort();
  const n = await spawnNode({ GRPC_PORT: String(port), GRPC_SERVER_IMPL: impl, GRPC_SERVER_USE_TLS: "true", ...env });
  t.teardown(() => n.kill());
  return port;
}

for (const impl of ["ringlimit", "node-http2"]) {
  t.test(`GRPC_SERVER_IMPL=${impl}: client certificates`, async (t) => {
    const server = await selfSignedCert(t, { commonName: "ratelimit", ip: "127.0.0.1" });
    const envoy = await selfSignedCert(t, { commonName: "envoy", ip: "10.1.2.3" });
    const stranger = await selfSignedCert(t, { commonName: "stranger" });
    const files = { GRPC_SERVER_TLS_CERT: server.certFile, GRPC_SERVER_TLS_KEY: server.keyFile, GRPC_SERVER_TLS_CA_CERT: envoy.certFile };
    const port = await node(t, impl, files);
    t.equal(await check(port, server.cert, envoy), "grpc-status 0", "the CA's certificate: served");
    // the own server's 415 has a text body, node:http2's has none: which server holds the port
    t.equal((await plainGet(port, server.cert, envoy)).length > 0, impl === "ringlimit", `${impl} serves the port`);
    t.match(await check(port, server.cert), /error|closed/, "no certificate: refused");
    t.match(await check(port, server.cert, stranger), /error|closed/, "another CA's certificate: refused");

    const withSan = await node(t, impl, { ...files, GRPC_CLIENT_TLS_SAN: "10.1.2.3" });
    t.equal(await check(withSan, server.cert, envoy), "grpc-status 0", "the certificate carries GRPC_CLIENT_TLS_SAN");
    const wrongSan = await node(t, impl, { ...files, GRPC_CLIENT_TLS_SAN: "10.9.9.9" });
    t.match(await check(wrongSan, server.cert, envoy), /error|closed/, "without the SAN: refused");
  });
}

/**
 * The gRPC port's TLS (grpc-tls.ts) in this process, over real TLS connections: a client
 * certificate from the CA is required; GRPC_CLIENT_TLS_SAN refuses a certificate without the
 * name; a Kubernetes Secret's rotation (the kubelet swaps a `..data` symlink) is picked up for
 * new connections; and the ratelimit_service_rate_limit_* labels of a rule's metric key.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import tls from "node:tls";
import { pino } from "pino";
import t, { type Test } from "tap";
import { GrpcTls } from "../../../src/rls/grpc/grpc-tls.js";
import { mapperLabels } from "../../../src/rls/rls-metrics.js";
import { selfSignedCert, type CertFiles } from "../../harness/certs.js";

/** Connects with `client` (or no certificate); the server certificate's common name, or the error. */
function handshake(port: number, ca: Buffer, client?: CertFiles): Promise<string> {
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: "127.0.0.1",
      port,
      ca,
      ALPNProtocols: ["h2"],
      ...(client ? { cert: client.cert, key: client.key } : {}),
      checkServerIdentity: () => undefined,
    });
    socket.once("secureConnect", () => {
      const cn = String(socket.getPeerCertificate().subject.CN);
      // TLS 1.3: the server's verdict on the client certificate arrives after the handshake.
      socket.once("data", () => {});
      socket.once("error", (e) => resolve(`error: ${e.message}`));
      socket.once("close", () => resolve(`closed (${cn})`));
      setTimeout(() => {
        socket.destroy();
        resolve(cn);
      }, 300);
    });
    socket.once("error", (e) => resolve(`error: ${e.message}`));
  });
}

async function listen(t: Test, server: GrpcTls): Promise<number> {
  t.teardown(() => {
    server.close();
    server.server.close();
  });
  return new Promise((r) => server.server.listen(0, "127.0.0.1", () => r((server.server.address() as { port: number }).port)));
}

t.test("client certificates from the CA are required; GRPC_CLIENT_TLS_SAN checks the name", async (t) => {
  const node = await selfSignedCert(t, { commonName: "ratelimit", ip: "127.0.0.1" });
  const envoy = await selfSignedCert(t, { commonName: "envoy", ip: "10.1.2.3" });
  const stranger = await selfSignedCert(t, { commonName: "stranger" });
  const port = await listen(t, new GrpcTls({ certFile: node.certFile, keyFile: node.keyFile, caFile: envoy.certFile }, pino({ level: "silent" })));
  t.equal(await handshake(port, node.cert, envoy), "ratelimit", "the CA's certificate: served");
  t.match(await handshake(port, node.cert), /error|closed/, "no certificate: refused");
  t.match(await handshake(port, node.cert, stranger), /error|closed/, "another CA's certificate: refused");

  const withSan = await listen(
    t,
    new GrpcTls({ certFile: node.certFile, keyFile: node.keyFile, caFile: envoy.certFile, clientSan: "10.1.2.3" }, pino({ level: "silent" })),
  );
  t.equal(await handshake(withSan, node.cert, envoy), "ratelimit", "the certificate carries the SAN");
  const wrongSan = await listen(
    t,
    new GrpcTls({ certFile: node.certFile, keyFile: node.keyFile, caFile: envoy.certFile, clientSan: "10.9.9.9" }, pino({ level: "silent" })),
  );
  t.match(await handshake(wrongSan, node.cert, envoy), /error|closed/, "without the SAN: the connection is closed");
});

t.test("a Secret volume's symlink swap is picked up for new connections", async (t) => {
  const first = await selfSignedCert(t, { commonName: "first", ip: "127.0.0.1" });
  const second = await selfSignedCert(t, { commonName: "second", ip: "127.0.0.1" });
  // The kubelet's layout: /certs/tls.crt → ..data/tls.crt, ..data → ..<timestamp>/
  const dir = mkdtempSync(path.join(tmpdir(), "grpc-tls-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const version = (name: string, cert: CertFiles) => {
    mkdirSync(path.join(dir, name));
    writeFileSync(path.join(dir, name, "tls.crt"), cert.cert);
    writeFileSync(path.join(dir, name, "tls.key"), cert.key);
  };
  version("..v1", first);
  symlinkSync("..v1", path.join(dir, "..data"));
  symlinkSync("..data/tls.crt", path.join(dir, "tls.crt"));
  symlinkSync("..data/tls.key", path.join(dir, "tls.key"));
  const server = new GrpcTls({ certFile: path.join(dir, "tls.crt"), keyFile: path.join(dir, "tls.key") }, pino({ level: "silent" }));
  const port = await listen(t, server);
  t.equal(await handshake(port, first.cert), "first");
  t.equal(server.check(), false, "nothing changed: nothing reloaded");
  version("..v2", second);
  symlinkSync("..v2", path.join(dir, "..data_tmp"));
  renameSync(path.join(dir, "..data_tmp"), path.join(dir, "..data"));
  t.equal(server.check(), true, "the swap is seen");
  t.equal(await handshake(port, Buffer.concat([first.cert, Buffer.from("\n"), second.cert])), "second", "new connections get the new certificate");
});

t.test("the statsd mapper's labels of a rule's metric key", async (t) => {
  t.same(mapperLabels("edge", "edge.remote_address"), { domain: "edge", key1: "remote_address" });
  t.same(mapperLabels("edge", "edge.user_u1.plan_free.extra"), { domain: "edge", key1: "user_u1", key2: "plan_free" }, "deeper levels dropped");
  t.same(mapperLabels("a.b", "a.b.k_v"), { domain: "a.b", key1: "k_v" }, "a domain with dots stays whole");
});

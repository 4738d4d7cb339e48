/**
 * Issue #41: grpc-go (google.golang.org/grpc, the client Envoy's Go users and grpcurl are built
 * on) as a client of the gRPC port of a real node, on each of its servers, over plaintext
 * HTTP/2, TLS and mutual TLS (a client certificate instead of an API key). The certificates are
 * made in JavaScript (test/harness/certs.ts) and handed to the Go client by their files. The Go
 * program in grpc-go/ runs one mode per process and prints its results as JSON; this file
 * asserts them. Without Go or its module proxy the whole file skips with the one line goBuild
 * returns.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import t, { type Test } from "tap";
import { selfSignedCert } from "../harness/certs.js";
import { spawnProtected } from "../harness/child-processes.js";
import { TEST_KEY } from "../harness/http-client.js";
import { goBuild } from "./go-tools.js";
import { startRlsNode } from "./hostile/harness.js";

t.setTimeout(600_000);

/** the Go module sits beside this file's source, not beside the compiled one in dist/ */
const SOURCE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../test/rls/grpc-go");

interface Result {
  code: string;
  message?: string;
  overall?: number;
  remaining: number;
  ms: number;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Line = any;

type Transport = "plaintext" | "tls" | "mtls";

/** How the node and the Go client speak on the port: the node's variables, the client's, its key. */
interface Secured {
  node: Record<string, string>;
  client: Record<string, string>;
  /** "-": the client sends no authorization (mutual TLS: the certificate is the credential) */
  key: string;
}

async function secure(t: Test, transport: Transport): Promise<Secured> {
  if (transport === "plaintext") return { node: {}, client: {}, key: TEST_KEY };
  // the name the client dials, in the server's certificate: grpc-go checks it
  const server = await selfSignedCert(t, { commonName: "ratelimit", ip: "127.0.0.1" });
  const node = { GRPC_SERVER_USE_TLS: "true", GRPC_SERVER_TLS_CERT: server.certFile, GRPC_SERVER_TLS_KEY: server.keyFile };
  if (transport === "tls") return { node, client: { GRPCGO_CA: server.certFile }, key: TEST_KEY };
  const envoy = await selfSignedCert(t, { commonName: "envoy" });
  return {
    node: { ...node, GRPC_SERVER_TLS_CA_CERT: envoy.certFile },
    client: { GRPCGO_CA: server.certFile, GRPCGO_CERT: envoy.certFile, GRPCGO_KEY: envoy.keyFile },
    key: "-",
  };
}

/** Runs the client in `mode` against `port` to its exit; its JSON lines. */
async function run(binary: string, port: number, mode: string, secured: Secured, started?: (line: Line) => void): Promise<Line[]> {
  const child = spawnProtected(binary, [`127.0.0.1:${port}`, secured.key, mode], {
    env: { ...process.env, ...secured.client },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Line[] = [];
  let out = "";
  let err = "";
  child.stdout!.on("data", (c: Buffer) => {
    out += c.toString();
    for (let i = out.indexOf("\n"); i >= 0; i = out.indexOf("\n")) {
      const line = JSON.parse(out.slice(0, i)) as Line;
      out = out.slice(i + 1);
      lines.push(line);
      started?.(line);
    }
  });
  child.stderr!.on("data", (c: Buffer) => (err += c.toString()));
  const code = await child.closed;
  if (code !== 0) throw new Error(`grpcgo ${mode} exited ${code}: ${err.trim()}`);
  return lines;
}

const built = await goBuild("grpcgo", SOURCE);

for (const [impl, transport] of ["ringlimit", "node-http2"].flatMap((i) => (["plaintext", "tls", "mtls"] as const).map((x) => [i, x] as const))) {
  t.test(`grpc-go against GRPC_SERVER_IMPL=${impl} over ${transport}`, { skip: "skip" in built ? built.skip : false }, async (t: Test) => {
    if (!("binary" in built)) return;
    const binary = built.binary;
    const secured = await secure(t, transport);
    const startNode = (t: Test, env: Record<string, string> = {}) => startRlsNode(t, { GRPC_SERVER_IMPL: impl, ...secured.node, ...env });

    if (transport === "mtls") {
      t.test("without a client certificate, or with an API key but no certificate: no call is answered", async (t) => {
        const { grpcPort } = await startNode(t);
        const [bare] = await run(binary, grpcPort, "once", { ...secured, client: { GRPCGO_CA: secured.client.GRPCGO_CA! } });
        t.equal(bare.code, "Unavailable", "the handshake is refused: grpc-go reports UNAVAILABLE");
        const [keyed] = await run(binary, grpcPort, "once", { key: TEST_KEY, node: {}, client: { GRPCGO_CA: secured.client.GRPCGO_CA! } });
        t.equal(keyed.code, "Unavailable", "an API key does not stand in for the certificate");
        const [served] = await run(binary, grpcPort, "once", secured);
        t.equal(served.code, "OK", "with the certificate, and no key: served");
      });
    }

    t.test("keepalive pings every 10 s without a stream keep the one connection up", async (t) => {
      const { grpcPort } = await startNode(t);
      // 25 s idle: two pings (10 s and 20 s), each a cheap frame in the own server's ping
      // budget (src/rls/h2/budget.ts), far under the idle GOAWAY at 60 s
      const [r] = await run(binary, grpcPort, "keepalive", secured);
      t.equal(r.first.code, "OK");
      t.equal(r.second.code, "OK", "a call after the pings is answered");
      // a GOAWAY (ENHANCE_YOUR_CALM or any other) would take the channel out of READY and a
      // second call would dial again
      t.same(r.states, [], "the channel never left READY across the pings");
      t.equal(r.dials, 1, "one TCP connection for both calls");
    });

    t.test("grpc.UseCompressor(gzip): UNIMPLEMENTED at once", async (t) => {
      const { grpcPort } = await startNode(t, { GRPC_DEFAULT_DEADLINE_MS: "60000" });
      const [gz, next] = await run(binary, grpcPort, "gzip", secured);
      // the call's deadline is 60 s: an answer that waited for it would be DEADLINE_EXCEEDED
      t.equal(gz.code, "Unimplemented", "a compressed call is refused, not left to its deadline");
      t.match(gz.message, /compress/);
      t.comment(`answered in ${gz.ms} ms of a 60 s deadline`);
      t.equal(next.after.code, "OK", "an uncompressed call on the same channel is served");
      t.equal(next.dials, 1, "the refusal kept the connection");
    });

    t.test("200 concurrent ShouldRateLimit calls on one connection, each counted once", async (t) => {
      const { grpcPort } = await startNode(t);
      const [r] = await run(binary, grpcPort, "concurrent", secured);
      const results = r.results as Result[];
      t.equal(results.length, 200);
      t.same(
        results.filter((x) => x.code !== "OK"),
        [],
        "every call OK",
      );
      t.ok(
        results.every((x) => x.overall === 1),
        "every call under its limit of 1000",
      );
      // Invariant: 200 hits on one counter of 1000 leave 999, 998, ..., 800, each seen by exactly
      // one call — a call counted twice or lost would repeat or skip a value
      const remaining = results.map((x) => x.remaining).sort((a, b) => b - a);
      t.same(
        remaining,
        Array.from({ length: 200 }, (_, i) => 999 - i),
        "limit_remaining 999 down to 800, each once",
      );
      t.equal(r.dials, 1, "all on one TCP connection");
    });

    t.test("SIGTERM: GOAWAY, calls in flight answered, a new call UNAVAILABLE", async (t) => {
      const { node, grpcPort } = await startNode(t);
      const lines = await run(binary, grpcPort, "goaway", secured, (line) => {
        if (line.open !== undefined) node.signal("SIGTERM"); // the streams' headers were read
      });
      const [opened, r] = lines;
      t.equal(opened.before.code, "OK");
      t.equal(r.left, true, "the channel left READY: the GOAWAY arrived");
      const inflight = r.inflight as Result[];
      t.equal(inflight.length, opened.open);
      t.same(
        inflight.filter((x) => x.code !== "OK" || x.overall !== 1),
        [],
        "every call opened before the SIGTERM is answered OK",
      );
      t.equal(r.after.code, "Unavailable", "a call after the GOAWAY fails UNAVAILABLE, not at its deadline");
      const exit = await node.exited;
      t.equal(exit.code, 0, "the node stopped cleanly");
    });
  });
}

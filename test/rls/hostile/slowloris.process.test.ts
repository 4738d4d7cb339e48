/**
 * Issue #33, slowloris on the gRPC port: raw TCP connections that stay idle, send only the
 * HTTP/2 preface, or the preface, SETTINGS and half a frame. Each is closed (preface or
 * idle timeout, or the connection cap), the node's descriptors stay under the cap, and a
 * new Check and /health are answered while they are held.
 */
import net from "node:net";
import { readdirSync } from "node:fs";
import t from "tap";
import { sleep } from "../../harness/wait.js";
import { assertResponsive, beside, call, connect, GRPC, grpcFrame, HEALTH_CHECK, healthRequest, startRlsNode } from "./harness.js";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
/** an empty SETTINGS frame: length 0, type 4, flags 0, stream 0 */
const SETTINGS = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
/** three bytes of a nine-byte frame head */
const HALF_FRAME = Buffer.from([0, 0, 10]);

const openFds = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

t.test("idle, preface-only and half-frame connections are closed; the port keeps answering", async (t) => {
  const cap = 200;
  const { node, grpcPort } = await startRlsNode(t, {
    GRPC_AUTH: "none",
    GRPC_MAX_CONNECTIONS: String(cap),
    GRPC_PREFACE_TIMEOUT_MS: "1000",
    GRPC_IDLE_TIMEOUT_MS: "2000",
  });
  const fdsBefore = openFds(node.pid);
  const sockets: net.Socket[] = [];
  const closedAt: number[] = [];
  t.teardown(() => sockets.forEach((s) => s.destroy()));
  const start = Date.now();
  const { result, beside: b } = await beside([node], async () => {
    for (let i = 0; i < 300; i++) {
      const s = net.connect(grpcPort, "127.0.0.1");
      s.on("error", () => {});
      s.on("close", () => closedAt.push(Date.now() - start));
      s.on("data", () => {});
      const kind = i % 3;
      s.on("connect", () => {
        if (kind === 1) s.write(PREFACE);
        if (kind === 2) s.write(Buffer.concat([PREFACE, SETTINGS, HALF_FRAME]));
      });
      sockets.push(s);
    }
    await sleep(300);
    const mostFds = openFds(node.pid);
    // a gateway's new connection and its Check, while the attack holds its connections
    const fresh = await connect(grpcPort);
    const check = await call(fresh, HEALTH_CHECK, grpcFrame(healthRequest("")));
    fresh.destroy();
    // every attacking connection closed by the node, the slowest after the idle timeout
    for (let i = 0; i < 100 && closedAt.length < sockets.length; i++) await sleep(100);
    return { mostFds, check };
  });
  t.equal(result.check.status, GRPC.OK, "a new connection's Check is answered");
  t.ok(result.mostFds - fdsBefore <= cap + 10, `the node held ${result.mostFds - fdsBefore} more descriptors (cap ${cap})`);
  t.equal(closedAt.length, 300, `all 300 closed by the node, the last after ${Math.max(...closedAt)} ms`);
  assertResponsive(t, b, "beside them");
});

t.test("a stream never ended holds its connection only until the deadline, gRPC or not", async (t) => {
  const { grpcPort } = await startRlsNode(t, { GRPC_AUTH: "none", GRPC_DEFAULT_DEADLINE_MS: "1000" });
  const session = await connect(grpcPort);
  t.teardown(() => session.destroy());
  const notGrpc = call(session, HEALTH_CHECK, Buffer.from("x"), { "content-type": "text/plain" }, false);
  const unknown = call(session, "/no.Such/Method", Buffer.from("x"), {}, false);
  const check = call(session, HEALTH_CHECK, grpcFrame(Buffer.alloc(3), 10), {}, false);
  const [a, b, c] = await Promise.all([notGrpc, unknown, check]);
  for (const [what, r] of [
    ["not gRPC (415)", a],
    ["an unknown method", b],
    ["an unfinished Check", c],
  ] as const) {
    t.ok(r.ms < 10_000, `${what}: closed after ${r.ms.toFixed(0)} ms`);
  }
  t.equal(c.status, GRPC.DEADLINE_EXCEEDED);
});

/**
 * Issue #33, the unauthenticated health service of the gRPC port, attacked over the wire:
 * Check streams left unfinished (one declaring a 4 GiB message), Watch streams by the
 * thousand, and a 1 MiB unknown service name. Each ends in a refused or timed-out stream,
 * with the node's memory bounded, /health answering beside it, and a legitimate Check
 * still answered.
 */
import type { ClientHttp2Session } from "node:http2";
import t, { type Test } from "tap";
import { sleep } from "../../harness/wait.js";
import { assertResponsive, beside, call, connect, GRPC, grpcFrame, HEALTH_CHECK, HEALTH_WATCH, healthRequest, rssMb, startRlsNode } from "./harness.js";

const SERVING = Buffer.from([8, 1]);

async function sessions(t: Test, port: number, n: number): Promise<ClientHttp2Session[]> {
  const out: ClientHttp2Session[] = [];
  for (let i = 0; i < n; i++) out.push(await connect(port));
  t.teardown(() => out.forEach((s) => s.destroy()));
  return out;
}

t.test("Check streams left unfinished, no key: refused or ended at their deadline, memory bounded", async (t) => {
  const { node, grpcPort } = await startRlsNode(t, { GRPC_AUTH: "none", GRPC_DEFAULT_DEADLINE_MS: "3000" });
  const before = rssMb(node.pid);
  const conns = await sessions(t, grpcPort, 20);
  const { result, beside: b } = await beside([node], async () => {
    const calls = [];
    for (let i = 0; i < 2000; i++) {
      const s = conns[i % conns.length]!;
      // half declare 4 GiB, half a small message they never finish
      const body = i % 2 === 0 ? grpcFrame(Buffer.alloc(1000, 0x41), 0xffffffff) : grpcFrame(Buffer.alloc(500, 0x0a), 1000);
      calls.push(call(s, HEALTH_CHECK, body, {}, false));
    }
    // a legitimate Check on a fresh connection, in the middle of it
    const fresh = await connect(grpcPort);
    const legit = await call(fresh, HEALTH_CHECK, grpcFrame(healthRequest("")));
    fresh.destroy();
    return { all: await Promise.all(calls), legit };
  });
  const declared4G = result.all.filter((_, i) => i % 2 === 0);
  const unfinished = result.all.filter((_, i) => i % 2 === 1);
  t.ok(
    declared4G.every((r) => r.status === GRPC.RESOURCE_EXHAUSTED),
    "a head declaring 4 GiB is refused RESOURCE_EXHAUSTED at once",
  );
  t.ok(
    unfinished.every((r) => r.status === GRPC.DEADLINE_EXCEEDED || r.reset),
    "an unfinished message ends at the default deadline",
  );
  t.equal(result.legit.status, GRPC.OK, "a legitimate Check is answered beside the attack");
  t.same(result.legit.messages[0], SERVING);
  t.ok(b.peakRssMb - before < 150, `RSS grew ${(b.peakRssMb - before).toFixed(0)} MB (before the fix: +1,999 MB)`);
  assertResponsive(t, b, "beside the attack");
});

t.test("grpc-timeout is honoured on an unfinished Check", async (t) => {
  const { grpcPort } = await startRlsNode(t, { GRPC_AUTH: "none" });
  const [s] = await sessions(t, grpcPort, 1);
  const r = await call(s!, HEALTH_CHECK, grpcFrame(Buffer.alloc(10), 100), { "grpc-timeout": "200m" }, false);
  t.equal(r.status, GRPC.DEADLINE_EXCEEDED);
  t.ok(r.ms >= 150 && r.ms < 5000, `ended after ${r.ms.toFixed(0)} ms`);
});

t.test("a 1 MiB unknown service name, no key: refused by size; a long one is echoed cut short", async (t) => {
  const { node, grpcPort } = await startRlsNode(t, { GRPC_AUTH: "none" });
  const conns = await sessions(t, grpcPort, 8);
  // Built once, before the probes start: 32 MiB built inside the attack stalled this process's
  // own loop, and with it the /health probe that shares it (not the node's).
  const huge = grpcFrame(healthRequest("x".repeat(1 << 20)));
  const { result, beside: b } = await beside([node], () => Promise.all(conns.flatMap((s) => [0, 1, 2, 3].map(() => call(s, HEALTH_CHECK, huge)))));
  t.ok(
    result.every((r) => r.status === GRPC.RESOURCE_EXHAUSTED),
    "RESOURCE_EXHAUSTED: a health request is at most 1 KiB",
  );
  assertResponsive(t, b, "beside 32 such calls");
  const long = await call(conns[0]!, HEALTH_CHECK, grpcFrame(healthRequest("é".repeat(120))));
  t.equal(long.status, GRPC.NOT_FOUND);
  t.ok(long.message.length < 80, `the name is echoed cut short: ${long.message}`);
  t.match(long.message, /^unknown service "é+…"$/);
  const over = await call(conns[0]!, HEALTH_CHECK, grpcFrame(healthRequest("y".repeat(300))));
  t.equal(over.status, GRPC.INVALID_ARGUMENT, "a service name over 256 bytes is refused, not looked up");
});

/** A Watch stream: resolves with its first message or status, and stays open. */
function watch(session: ClientHttp2Session): Promise<{ status: number | undefined; first: Buffer | undefined }> {
  return new Promise((resolve) => {
    const stream = session.request({ ":method": "POST", ":path": HEALTH_WATCH, "content-type": "application/grpc", te: "trailers" });
    stream.on("error", () => {});
    stream.on("response", (h) => {
      if (h["grpc-status"] !== undefined) resolve({ status: Number(h["grpc-status"]), first: undefined });
    });
    stream.on("data", (c: Buffer) => resolve({ status: undefined, first: c.subarray(5) }));
    stream.on("close", () => resolve({ status: undefined, first: undefined }));
    stream.end(grpcFrame(healthRequest("")));
  });
}

t.test("Watch streams, no key: bounded per connection and per node", async (t) => {
  const { node, grpcPort } = await startRlsNode(t, { GRPC_AUTH: "none" });
  const before = rssMb(node.pid);
  const [one] = await sessions(t, grpcPort, 1);
  const onOne = await Promise.all(Array.from({ length: 20 }, () => watch(one!)));
  t.equal(onOne.filter((w) => w.first?.equals(SERVING)).length, 8, "8 Watch streams on one connection are served");
  t.equal(onOne.filter((w) => w.status === GRPC.RESOURCE_EXHAUSTED).length, 12, "the rest are refused");
  const conns = await sessions(t, grpcPort, 140);
  const result = await Promise.all(conns.flatMap((s) => Array.from({ length: 8 }, () => watch(s))));
  const served = result.filter((w) => w.first !== undefined).length;
  t.equal(served + 8, 1024, "1,024 Watch streams on the node, every connection together");
  t.equal(result.filter((w) => w.status === GRPC.RESOURCE_EXHAUSTED).length, 1120 - served, "the rest are refused");
  // held, as the attacker holds them: the node goes on answering
  const { beside: b } = await beside([node], () => sleep(2000));
  t.ok(b.peakRssMb - before < 150, `RSS grew ${(b.peakRssMb - before).toFixed(0)} MB (before the fix: +633 MB for 120,000)`);
  assertResponsive(t, b, "while they are held");
  const fresh = await connect(grpcPort);
  t.equal((await call(fresh, HEALTH_CHECK, grpcFrame(healthRequest("")))).status, GRPC.OK, "Check still answers");
  fresh.destroy();
});

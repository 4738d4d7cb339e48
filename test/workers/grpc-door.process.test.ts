/**
 * WORKERS=2 with GRPC_PORT (docs/architecture.md, Threads): a real node process whose gRPC
 * port is served by both worker threads, each listening with SO_REUSEPORT, with every
 * ShouldRateLimit decided by the one state owner. Calls are answered by both threads (each
 * worker's ringlimit_worker_grpc_calls_total{worker} grows), 20 clients on one descriptor
 * count exactly, POLICY_PATH's rules and their reload reach both threads (each resolves with a
 * copy of the owner's policy), a second process cannot take the port, and SIGTERM drains both workers:
 * health turns NOT_SERVING on every thread, calls in flight are answered, the node exits 0;
 * from the signal on, no worker takes a new connection.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { closeAgents, request, TEST_KEY } from "../harness/http-client.js";
import { spawnNode, type NodeProcess } from "../harness/node-process.js";
import { freePort } from "../harness/ports.js";
import { eventually } from "../harness/wait.js";
import { grpcCode, oneDescriptor, rlsClient, type RlsClient } from "../rls/rls-client.js";

t.teardown(closeAgents);

/**
 * Each client on a TCP connection of its own: grpc-js otherwise shares one connection among
 * clients of one address. The kernel spreads connections over the workers by a hash of their
 * addresses, so CONNECTIONS of them all reach one worker with probability 2^-(CONNECTIONS-1).
 */
const CONNECTIONS = 20;
const OWN_CONNECTION = { "grpc.use_local_subchannel_pool": 1 };

async function grpcNode(t: Test, env: Record<string, string> = {}): Promise<{ node: NodeProcess; address: string }> {
  const grpcPort = await freePort();
  const node = await spawnNode({ WORKERS: "2", GRPC_PORT: String(grpcPort), ...env });
  t.teardown(() => node.kill());
  return { node, address: `127.0.0.1:${grpcPort}` };
}

function clients(t: Test, address: string, n: number): RlsClient[] {
  const list = Array.from({ length: n }, () => rlsClient(address, { key: TEST_KEY, channelOptions: OWN_CONNECTION }));
  t.teardown(() => list.forEach((c) => c.close()));
  return list;
}

async function grpcCallsByWorker(url: string): Promise<number[]> {
  const text = (await request(url + "/metrics", { agent: false })).text;
  return [0, 1].map((w) => Number(new RegExp(`^ringlimit_worker_grpc_calls_total\\{worker="${w}"\\} (\\d+)`, "m").exec(text)?.[1] ?? 0));
}

/** A descriptor with its own daily limit (the day's end is far from any test run's seconds). */
const perDay = (value: string, n: number) => ({
  domain: "edge",
  descriptors: [{ entries: [{ key: "user", value }], limit: { requests_per_unit: n, unit: "DAY" } }],
});

t.test("ShouldRateLimit and health are answered by both worker threads, counted by the one owner", async (t) => {
  const { node, address } = await grpcNode(t);
  const rls = clients(t, address, CONNECTIONS);
  for (const c of rls) t.equal((await c.check()).status, "SERVING", "health Check from a worker");
  const answers = [];
  for (const c of rls) answers.push(await c.shouldRateLimit(perDay("both", 1000)));
  t.ok(
    answers.every((a) => a.overall_code === "OK"),
    "every call OK",
  );
  // One counter whichever thread took the call: the owner's count goes down by one per call.
  t.same(
    answers.map((a) => a.statuses[0].limit_remaining),
    Array.from({ length: CONNECTIONS }, (_, i) => 1000 - 1 - i),
  );
  const [w0, w1] = await grpcCallsByWorker(node.url);
  t.equal(w0! + w1!, CONNECTIONS, "every call reached a worker's door, none the owner's");
  t.ok(w0! > 0 && w1! > 0, `both workers answered (worker 0: ${w0}, worker 1: ${w1})`);
  // The RLS service's own counters are the owner's: counted once however many threads there are.
  const text = (await request(node.url + "/metrics", { agent: false })).text;
  t.match(text, /ringlimit_worker_grpc_calls_total/, "the per-worker metric is in the node's one /metrics");
});

t.test("20 clients on one descriptor of limit 1,000: exactly 1,000 OK, over both threads", async (t) => {
  const { node, address } = await grpcNode(t);
  const rls = clients(t, address, CONNECTIONS);
  let ok = 0;
  let over = 0;
  // Invariant checked: OK answers == limit exactly, whichever thread each call came in by.
  await Promise.all(
    rls.map(async (c) => {
      for (let i = 0; i < 60; i++) {
        const a = await c.shouldRateLimit(perDay("exact", 1000));
        if (a.overall_code === "OK") ok++;
        else if (a.overall_code === "OVER_LIMIT") over++;
      }
    }),
  );
  t.equal(ok, 1000, "exactly the limit allowed");
  t.equal(over, CONNECTIONS * 60 - 1000, "the rest over the limit");
  const [w0, w1] = await grpcCallsByWorker(node.url);
  t.equal(w0! + w1!, CONNECTIONS * 60, "every call counted by one worker");
  t.ok(w0! > 0 && w1! > 0, `spread over both workers (worker 0: ${w0}, worker 1: ${w1})`);
});

t.test("POLICY_PATH's rule decides on both workers, and a reload reaches both", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-policy-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const rule = (perDay: number) => `domain: edge\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: day\n      requests_per_unit: ${perDay}\n`;
  writeFileSync(path.join(dir, "edge.yaml"), rule(100));
  const { node, address } = await grpcNode(t, { POLICY_PATH: dir });
  const rls = clients(t, address, CONNECTIONS);
  const limits = async (user: string): Promise<number[]> =>
    Promise.all(rls.map(async (c) => (await c.shouldRateLimit(oneDescriptor("edge", [["user", user]]))).statuses[0].current_limit?.requests_per_unit));
  t.same(await limits("ann"), Array(CONNECTIONS).fill(100), "the file's rule on every connection");
  const [w0, w1] = await grpcCallsByWorker(node.url);
  t.ok(w0! > 0 && w1! > 0, `both workers resolved with it (worker 0: ${w0}, worker 1: ${w1})`);
  // Written beside the file and renamed over it: never half a file.
  writeFileSync(path.join(dir, ".edge.tmp"), rule(7));
  renameSync(path.join(dir, ".edge.tmp"), path.join(dir, "edge.yaml"));
  const reloaded = await eventually(async () => (await limits("bob")).every((n) => n === 7), 15_000);
  t.ok(reloaded, "the new rule on every connection, so on both workers");
  // One count for a user whichever worker resolved the call: 20 calls of 7 allowed.
  const codes = [];
  for (const c of rls) codes.push((await c.shouldRateLimit(oneDescriptor("edge", [["user", "cy"]]))).overall_code);
  t.equal(codes.filter((c) => c === "OK").length, 7, "the owner counts one descriptor for both workers");
});

t.test("the gRPC port stays this node's: a second node on it fails to start, a plain bind fails", async (t) => {
  const { address } = await grpcNode(t);
  const port = Number(address.split(":")[1]);
  const second = await spawnNode({ WORKERS: "2", GRPC_PORT: String(port) }, { waitReady: false });
  t.teardown(() => second.kill());
  const exit = await second.exited;
  t.not(exit.code, 0, "the second node exits");
  t.match(second.output(), /GRPC_PORT/, "naming the setting");
  const single = await spawnNode({ WORKERS: "1", GRPC_PORT: String(port) }, { waitReady: false });
  t.teardown(() => single.kill());
  t.not((await single.exited).code, 0, "a single-thread node on the port fails too");
  const bound = await new Promise<string>((resolve) => {
    const s = net.createServer();
    s.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
    s.listen({ port, host: "127.0.0.1", exclusive: true }, () => s.close(() => resolve("bound")));
  });
  t.equal(bound, "EADDRINUSE", "a socket without SO_REUSEPORT cannot share the workers' port");
});

t.test("SIGTERM drains both workers: NOT_SERVING on every thread, calls in flight answered, exit 0", async (t) => {
  const { node, address } = await grpcNode(t, { DRAIN_TIMEOUT_MS: "10000" });
  const rls = clients(t, address, CONNECTIONS);
  // A Watch on every client: both workers hold some, and each must say NOT_SERVING. The
  // signal waits for every Watch's first message, so each one is served before the drain.
  let serving = 0;
  let allServing!: () => void;
  const watching = new Promise<void>((resolve) => (allServing = resolve));
  const watches = rls.map((c) => c.watch(2, "", () => ++serving === rls.length && allServing()));
  await watching;
  // Each client calls in a loop until a call fails: when the signal lands, every client has
  // a call in flight on a connection already open. A call is answered OK (it counted), or
  // refused UNAVAILABLE once its worker's door has closed (GOAWAY): never another failure,
  // and the calls sent during the drain are still answered.
  let signalled = false;
  let answered = 0;
  let allAnswered!: () => void;
  const warm = new Promise<void>((resolve) => (allAnswered = resolve));
  const loops = rls.map(async (c) => {
    const results = { before: 0, after: 0, failures: [] as number[] };
    for (let first = true; ; first = false) {
      try {
        const a = await c.shouldRateLimit(perDay("drain", 1_000_000));
        if (a.overall_code !== "OK") throw Object.assign(new Error(a.overall_code), { code: -1 });
        if (signalled) results.after++;
        else results.before++;
      } catch (err) {
        results.failures.push((err as { code: number }).code);
        return results;
      }
      if (first && ++answered === rls.length) allAnswered();
    }
  });
  await warm;
  signalled = true;
  node.signal("SIGTERM");
  const seen = await Promise.all(watches);
  t.ok(
    seen.every((s) => s[0].status === "SERVING" && s[1].status === "NOT_SERVING"),
    "every Watch saw SERVING then NOT_SERVING",
  );
  const results = await Promise.all(loops);
  const after = results.reduce((n, r) => n + r.after, 0);
  t.ok(after > 0, `calls answered OK during the drain (${after})`);
  t.same(
    results.flatMap((r) => r.failures.filter((code) => code !== 14)),
    [],
    "every loop ended on UNAVAILABLE, when its worker's door closed",
  );
  const exit = await node.exited;
  t.equal(exit.code, 0, "the node exits 0");
  t.notMatch(node.output(), /drain timeout/, "nothing left in flight at the end");
});

/*
 * Each worker hears of SIGTERM on its own turn and sends its GOAWAY then, while the other
 * still listens: a client that reconnects at once could be served by a worker that had not
 * drained yet (grpc-go.process.test.ts under WORKERS=2 saw its call after the GOAWAY answered
 * OK). Before the fix, a new connection made during the drain was served on either server.
 * The owner now raises a shared word before telling any worker, and from then no worker takes
 * a new gRPC connection. A POST whose body has not all arrived holds the drain open meanwhile.
 */
for (const impl of ["ringlimit", "node-http2"]) {
  t.test(`GRPC_SERVER_IMPL=${impl}: from SIGTERM no worker takes a new gRPC connection, while the drain still answers what is in flight`, async (t) => {
    const { node, address } = await grpcNode(t, { GRPC_SERVER_IMPL: impl, DRAIN_TIMEOUT_MS: "30000" });
    const [watcher] = clients(t, address, 1);
    let serving!: () => void;
    const first = new Promise<void>((resolve) => (serving = resolve));
    const watched = watcher!.watch(2, "", () => serving());
    const body = JSON.stringify({ namespace: "w", identifier: "held", limit: 10, duration: 3600 });
    const held = net.connect(node.port, "127.0.0.1");
    t.teardown(() => held.destroy());
    let reply = "";
    held.on("data", (d: Buffer) => (reply += d.toString()));
    held.write(
      `POST /limit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
    );
    const inFlight = async () => Number(/^ringlimit_requests_in_flight (\d+)/m.exec((await request(node.url + "/metrics", { agent: false })).text)?.[1] ?? 0);
    t.ok(await eventually(async () => (await inFlight()) === 1, 15_000), "the held POST is in flight");
    await first;
    node.signal("SIGTERM");
    const seen = await watched;
    t.same(
      seen.map((m) => m.status),
      ["SERVING", "NOT_SERVING"],
      "the drain has reached a worker",
    );
    // Fresh connections, so that both workers are asked (each hashed by its address).
    const late = await Promise.all(clients(t, address, 8).map((c) => grpcCode(c.shouldRateLimit(perDay("late", 1000)))));
    t.same(
      late.map((r) => r?.code),
      Array(8).fill(14),
      "every new connection refused: UNAVAILABLE, none served",
    );
    held.write(body.slice(10));
    t.ok(await eventually(() => /\r\n\r\n\{/.test(reply), 15_000), "the held POST is answered");
    t.match(reply, /^HTTP\/1\.1 200/, "with 200");
    t.equal((await node.exited).code, 0, "then the node exits 0");
  });
}

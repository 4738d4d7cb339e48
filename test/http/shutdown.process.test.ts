/**
 * Graceful shutdown of a spawned node (its own process group): on SIGTERM or SIGINT the
 * node turns /ready 503, stops accepting connections, finishes the request in flight, and
 * exits 0; a request that never finishes is cut off at DRAIN_TIMEOUT_MS.
 *
 * "In flight" is made observable with a chunked upload held half-way: the node has
 * accepted the request (it counts it) but cannot answer until the body is complete.
 */
import http from "node:http";
import net from "node:net";
import t from "tap";
import { closeAgents, request, TEST_KEY } from "../harness/http-client.js";
import { metric } from "../harness/cluster.js";
import { spawnNode, type NodeProcess } from "../harness/node-process.js";
import { validBody } from "../harness/contract.js";
import { sleep, until } from "../harness/wait.js";

t.teardown(closeAgents);

interface HeldUpload {
  /** send the rest of the body */
  finish(): void;
  result: Promise<{ status: number; text: string } | { error: string }>;
}

/** Start POST /limit with half its body sent; the rest goes when finish() is called. */
function heldUpload(url: string, body: string): HeldUpload {
  const u = new URL(url + "/limit");
  const half = Math.floor(body.length / 2);
  let req!: http.ClientRequest;
  const result = new Promise<{ status: number; text: string } | { error: string }>((resolve) => {
    req = http.request(
      {
        hostname: u.hostname,
        port: u.port,
        path: u.pathname,
        method: "POST",
        agent: false,
        headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json", "transfer-encoding": "chunked" },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        res.on("error", (err) => resolve({ error: err.message }));
      },
    );
    req.on("error", (err) => resolve({ error: err.message }));
  });
  req.write(body.slice(0, half));
  return { finish: () => req.end(body.slice(half)), result };
}

/** Whether a new TCP connection to the port is refused right now. */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port });
    s.on("connect", () => {
      s.destroy();
      resolve(false);
    });
    s.on("error", (err: NodeJS.ErrnoException) => resolve(err.code === "ECONNREFUSED"));
  });
}

function exitWithin(n: NodeProcess, ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null } | "timeout"> {
  return Promise.race([n.exited, sleep(ms).then(() => "timeout" as const)]);
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  t.test(`${signal} with a request in flight`, async (t) => {
    const n = await spawnNode({ DRAIN_TIMEOUT_MS: "10000", LOG_LEVEL: "info" });
    t.teardown(() => n.kill());
    const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.teardown(() => keepAlive.destroy());
    t.equal((await request(n.url + "/ready", { agent: keepAlive })).status, 200, "ready before the signal");

    const upload = heldUpload(n.url, JSON.stringify(validBody({ limit: 5 })));
    // The node has the headers and counts the request as in flight (not a guess of how long that takes).
    await until("the held upload in flight", async () => (await metric(n, "ringlimit_requests_in_flight")) === 1);
    n.signal(signal);

    // /ready on the connection that is already open: 503 while draining
    let readyDuringDrain: number | string = "none";
    await until(
      "/ready to change",
      async () => {
        try {
          const r = await request(n.url + "/ready", { agent: keepAlive, timeoutMs: 1000 });
          readyDuringDrain = r.status;
          if (r.status === 503) t.equal(r.json?.status, "draining");
          return r.status !== 200;
        } catch (err) {
          readyDuringDrain = (err as Error).message;
          return true;
        }
      },
      3000,
      25,
    );
    t.equal(readyDuringDrain, 503, "/ready answers 503 during the drain");
    t.ok(await until("new connections refused", () => refused(n.port), 3000, 25), "new connections are refused while draining");
    t.equal(n.child.exitCode, null, "still running: a request is in flight");

    upload.finish();
    const answer = await upload.result;
    t.ok("status" in answer && answer.status === 200, `the request in flight is answered: ${JSON.stringify(answer).slice(0, 200)}`);
    if ("status" in answer) t.equal(JSON.parse(answer.text).data.count, 1);

    const exit = await exitWithin(n, 5000);
    t.same(exit, { code: 0, signal: null }, "exits with code 0");
    t.ok(await refused(n.port), "nothing listens after exit");
    t.match(n.output(), new RegExp(`"signal":"${signal}"`), "the signal is logged");
    t.match(n.output(), /ringlimit node stopped/);
  });
}

t.test("SIGTERM on an idle node exits 0 promptly", async (t) => {
  const n = await spawnNode({});
  t.teardown(() => n.kill());
  t.equal(
    (
      await request(n.url + "/limit", {
        method: "POST",
        headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" },
        body: JSON.stringify(validBody()),
      })
    ).status,
    200,
  );
  const started = Date.now();
  n.signal("SIGTERM");
  const exit = await exitWithin(n, 5000);
  t.same(exit, { code: 0, signal: null });
  t.ok(Date.now() - started < 2000, `exit took ${Date.now() - started} ms`);
  t.ok(await refused(n.port));
});

t.test("requests written just before SIGTERM get real answers or a closed connection, never a wrong one or a hang", async (t) => {
  const n = await spawnNode({ DRAIN_TIMEOUT_MS: "5000" });
  t.teardown(() => n.kill());
  const agent = new http.Agent({ keepAlive: true, maxSockets: 20 });
  t.teardown(() => agent.destroy());
  const headers = { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" };
  const body = JSON.stringify(validBody({ limit: 1000 }));
  // warm up 20 keep-alive connections, then write 20 requests on them and signal once all are flushed
  await Promise.all(Array.from({ length: 20 }, () => request(n.url + "/limit", { method: "POST", headers, body, agent })));
  const u = new URL(n.url + "/limit");
  const flushed: Promise<void>[] = [];
  const burst = Array.from(
    { length: 20 },
    () =>
      new Promise<{ status: number; text: string } | Error>((resolve) => {
        const req = http.request(
          {
            hostname: u.hostname,
            port: u.port,
            path: u.pathname,
            method: "POST",
            agent,
            headers: { ...headers, "content-length": String(Buffer.byteLength(body)) },
            timeout: 5000,
          },
          (res) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (c: string) => (text += c));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
          },
        );
        req.on("timeout", () => req.destroy(new Error("request timed out")));
        req.on("error", resolve);
        flushed.push(new Promise((r) => req.on("finish", () => r())));
        req.end(body);
      }),
  );
  await Promise.all(flushed);
  n.signal("SIGTERM");
  const replies = await Promise.all(burst);
  let answered = 0;
  for (const r of replies) {
    if (r instanceof Error) {
      t.notMatch(r.message, /timed out/, "no request is left hanging");
      continue;
    }
    answered++;
    t.equal(r.status, 200, "an answered request is a real decision");
    const count = JSON.parse(r.text).data.count;
    t.ok(count > 20 && count <= 40, `count ${count}`);
  }
  t.comment(`${answered} of 20 requests written before the signal were answered; the rest saw the connection close`);
  const exit = await exitWithin(n, 5000);
  t.same(exit, { code: 0, signal: null });
});

t.test("a request that never completes is cut off at DRAIN_TIMEOUT_MS", async (t) => {
  const n = await spawnNode({ DRAIN_TIMEOUT_MS: "500", LOG_LEVEL: "warn" });
  t.teardown(() => n.kill());
  const upload = heldUpload(n.url, JSON.stringify(validBody()));
  await until("the held upload in flight", async () => (await metric(n, "ringlimit_requests_in_flight")) === 1);
  const started = Date.now();
  n.signal("SIGTERM");
  const exit = await exitWithin(n, 5000);
  const took = Date.now() - started;
  t.same(exit, { code: 0, signal: null }, "exits 0 after the drain timeout");
  t.ok(took >= 450 && took < 3000, `waited for the drain timeout (${took} ms)`);
  t.match(n.output(), /drain timeout/, "the cut-off is logged");
  const answer = await upload.result;
  t.ok("error" in answer || answer.status !== 200, `the stalled request was not given a decision: ${JSON.stringify(answer).slice(0, 120)}`);
});

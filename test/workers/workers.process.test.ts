/**
 * WORKERS=2 (docs/architecture.md, Threads): a real node process whose HTTP door runs in two
 * worker threads around one state owner. Every endpoint answers from both threads (each
 * worker's own counter, ringlimit_worker_requests_total{worker}, grows), one key shared by
 * 20 clients spread over both threads counts exactly, a worker that fails is replaced and its
 * callers see their connection close, and SIGTERM drains the workers before the node exits 0.
 */
import http from "node:http";
import t from "tap";
import { closeAgents, request, TEST_KEY } from "../harness/http-client.js";
import { spawnNode } from "../harness/node-process.js";
import { startTestNode } from "../harness/in-process-node.js";
import { eventually } from "../harness/wait.js";

t.teardown(closeAgents);

const AUTH = { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" };

async function workerCounts(url: string): Promise<number[]> {
  const text = (await request(url + "/metrics")).text;
  return [0, 1].map((w) => Number(new RegExp(`^ringlimit_worker_requests_total\\{worker="${w}"\\} (\\d+)`, "m").exec(text)?.[1] ?? 0));
}

/** POST on a connection of its own: the acceptor hands connections to the workers in turn. */
function fresh(url: string, path: string, body: unknown): Promise<{ status: number; json: any }> {
  return request(url + path, { method: "POST", headers: AUTH, body: JSON.stringify(body), agent: false });
}

t.test("every endpoint answers from both worker threads", async (t) => {
  const node = await spawnNode({ WORKERS: "2" });
  t.teardown(() => node.kill());
  const before = await workerCounts(node.url);
  const q = { namespace: "w", identifier: "all", limit: 100, duration: 60 };
  for (let i = 0; i < 4; i++) {
    t.equal((await fresh(node.url, "/limit", q)).status, 200, "POST /limit");
    const charge = await fresh(node.url, "/limit/charge", { ...q, identifier: "charged", cost: 10 });
    t.equal(charge.status, 200, "POST /limit/charge");
    const batch = await fresh(node.url, "/limit/batch", {
      requests: [
        { ...q, identifier: "b1" },
        { ...q, identifier: "b2" },
      ],
    });
    t.equal(batch.status, 200, "POST /limit/batch");
    t.equal(batch.json.data.results.length, 2);
  }
  // The counts are the owner's: 4 requests seen by whichever thread took them.
  const last = await fresh(node.url, "/limit", q);
  t.equal(last.json.data.remaining, 100 - 5, "one count across both threads");
  const reset = await fresh(node.url, "/limit/reset", { namespace: "w", identifier: "all" });
  t.equal(reset.status, 200, "POST /limit/reset");
  t.equal(reset.json.data.removed.length, 1);
  t.equal((await fresh(node.url, "/limit", q)).json.data.remaining, 99, "the reset reached the owner's table");
  const cluster = await request(node.url + "/cluster", { headers: AUTH, agent: false });
  t.equal(cluster.status, 200, "GET /cluster from a worker");
  t.equal((await request(node.url + "/ready", { agent: false })).status, 200, "GET /ready from a worker");
  const after = await workerCounts(node.url);
  t.ok(after[0]! > before[0]! && after[1]! > before[1]!, `both workers answered (worker 0: ${after[0]}, worker 1: ${after[1]})`);
});

t.test("20 clients on one key of limit 1,000: exactly 1,000 allowed, over both threads", async (t) => {
  const node = await spawnNode({ WORKERS: "2" });
  t.teardown(() => node.kill());
  const before = await workerCounts(node.url);
  const body = JSON.stringify({ namespace: "w", identifier: "exact", limit: 1000, duration: 3600 });
  let allowed = 0;
  let blocked = 0;
  // Invariant checked: allowed == limit exactly, whatever thread each request came in by.
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      for (let i = 0; i < 60; i++) {
        const r = await request(node.url + "/limit", { method: "POST", headers: AUTH, body, agent });
        if (r.status === 200) allowed++;
        else if (r.status === 429) blocked++;
      }
      agent.destroy();
    }),
  );
  t.equal(allowed, 1000, "exactly the limit allowed");
  t.equal(blocked, 200, "the rest blocked");
  const after = await workerCounts(node.url);
  const share = [after[0]! - before[0]!, after[1]! - before[1]!];
  t.ok(share[0]! > 0 && share[1]! > 0, `spread over both workers (${share[0]} and ${share[1]})`);
});

t.test("a worker that fails is replaced; its callers see the connection close, never a wrong count", async (t) => {
  const node = await startTestNode({ WORKERS: "2" });
  t.teardown(() => node.stop());
  const pool = node.node.workers!;
  const body = JSON.stringify({ namespace: "w", identifier: "crash", limit: 1000, duration: 3600 });
  // Two keep-alive connections: the acceptor gives one to each worker.
  const agents = [0, 1].map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
  t.teardown(() => agents.forEach((a) => a.destroy()));
  for (const agent of agents) t.equal((await request(node.url + "/limit", { method: "POST", headers: AUTH, body, agent })).status, 200);
  pool.crash(0);
  await eventually(() => pool.size === 1, 30_000);
  const results = await Promise.all(
    agents.map((agent) =>
      request(node.url + "/limit", { method: "POST", headers: AUTH, body, agent }).then(
        (r) => r.status,
        (err: Error) => err.message,
      ),
    ),
  );
  for (const r of results) t.ok(r === 200 || /socket hang up|ECONNRESET|EPIPE/.test(String(r)), `a 200 or the connection closed: ${r}`);
  t.ok(await eventually(() => pool.size === 2, 30_000), "worker 0 was restarted");
  // The count is the owner's: what was answered 200 is what was counted.
  let answered = results.filter((r) => r === 200).length + 2;
  for (let i = 0; i < 6; i++) if ((await fresh(node.url, "/limit", JSON.parse(body))).status === 200) answered++;
  const peek = await fresh(node.url, "/limit", { ...JSON.parse(body), cost: 0 });
  t.equal(peek.json.data.remaining, 1000 - answered, "nothing counted twice or lost across the crash");
});

t.test("SIGTERM drains every worker, then the owner, and the node exits 0", async (t) => {
  const node = await spawnNode({ WORKERS: "2", DRAIN_TIMEOUT_MS: "5000", LOG_LEVEL: "info" });
  t.teardown(() => node.kill());
  for (let i = 0; i < 4; i++) t.equal((await fresh(node.url, "/limit", { namespace: "w", identifier: "drain", limit: 10, duration: 60 })).status, 200);
  node.signal("SIGTERM");
  const exit = await node.exited;
  t.equal(exit.code, 0, "exit code 0");
  t.match(node.output(), /ringlimit node stopped/);
  t.notMatch(node.output(), /"level":50/, "no error logged on the way out");
});

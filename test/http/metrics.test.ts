/**
 * /metrics is cheap and protectable: rendered at most once per METRICS_CACHE_MS whatever
 * the number of scrapers, and behind METRICS_TOKEN when one is set (constant-time compare).
 *
 * Before (commit 81f8649): every scrape rendered (~0.9 ms of CPU), without authentication.
 */
import t from "tap";
import http from "node:http";
import { closeAgents, limit, request } from "../harness/http-client.js";
import { startTestNode } from "../harness/in-process-node.js";
import { sleep } from "../harness/wait.js";

t.teardown(closeAgents);

const counter = (text: string, name: string) =>
  Number(
    text
      .split("\n")
      .find((l) => l.startsWith(name + " "))
      ?.split(" ")[1],
  );
const TOKEN = "metrics-token-0123456789abcdef";

t.test("300 concurrent scrapes, then 300 connections polling: one render per interval", async (t) => {
  const node = await startTestNode({ METRICS_CACHE_MS: "500" });
  t.teardown(() => node.stop());
  const agent = new http.Agent({ keepAlive: true, maxSockets: 300 });
  t.teardown(() => agent.destroy());
  const scrape = () => request(node.url + "/metrics", { agent });

  const first = await scrape();
  const before = counter(first.text, "ringlimit_metrics_renders_total");
  await limit(node.url, { namespace: "m", identifier: "after-first-render", limit: 5, duration: 60 });
  const burst = await Promise.all(Array.from({ length: 300 }, scrape));
  t.ok(
    burst.every((r) => r.status === 200),
    "every scrape answered",
  );
  const texts = new Set(burst.map((r) => r.text));
  t.ok(texts.size <= 2, `at most two distinct texts in the burst (got ${texts.size})`);

  // 300 connections polling, 5 scrapes each, as fast as they are answered: at most one render
  // per 500 ms of that, whatever the machine's speed.
  const started = Date.now();
  await Promise.all(
    Array.from({ length: 300 }, async () => {
      for (let i = 0; i < 5; i++) await scrape();
    }),
  );
  const elapsed = Date.now() - started;
  await sleep(600);
  const last = await scrape();
  const renders = counter(last.text, "ringlimit_metrics_renders_total") - before;
  const allowed = Math.ceil(elapsed / 500) + 2;
  t.ok(renders >= 1 && renders <= allowed, `${renders} renders for 1,802 scrapes in ${elapsed} ms (at most ${allowed})`);
  t.match(last.text, /ringlimit_requests_total\{status="200",algorithm="fixed-window"\} 1/, "a later render shows the request");
});

t.test("METRICS_TOKEN: /metrics needs the bearer; /limit, /health and /ready do not", async (t) => {
  for (const separatePort of [false, true]) {
    const node = await startTestNode({ METRICS_TOKEN: TOKEN, ...(separatePort ? { METRICS_PORT: "0" } : {}) });
    t.teardown(() => node.stop());
    const base = separatePort ? `http://127.0.0.1:${node.node.metricsPort}` : node.url;
    const where = separatePort ? "METRICS_PORT" : "main port";
    for (const [what, headers] of [
      ["no header", {}],
      ["wrong token", { authorization: `Bearer ${TOKEN}x` }],
      ["a prefix of the token", { authorization: `Bearer ${TOKEN.slice(0, 10)}` }],
      ["another scheme", { authorization: `Basic ${TOKEN}` }],
    ] as const) {
      const r = await request(base + "/metrics", { headers });
      t.equal(r.status, 401, `${where}, ${what}: 401`);
      t.equal(r.headers["www-authenticate"], "Bearer");
      t.equal(r.json?.data?.error, "Unauthorized", "the error envelope");
      t.notOk(r.text.includes("ringlimit_"), "no metric leaked");
    }
    const ok = await request(base + "/metrics", { headers: { authorization: `bearer ${TOKEN}` } });
    t.equal(ok.status, 200, `${where}: the token opens it`);
    t.match(ok.text, /ringlimit_stored_keys/);
    t.equal((await request(node.url + "/health")).status, 200);
    t.equal((await request(node.url + "/ready")).status, 200);
    t.equal((await limit(node.url, { namespace: "m", identifier: "token", limit: 5, duration: 60 })).status, 200, "/limit uses API keys only");
  }
});

/**
 * Two limits on one route, and a cost reported after the response, in Fastify, Express and
 * Hono on real ports against a real ringlimit node: both limits apply, RateLimit and
 * RateLimit-Policy carry one item per limit under distinct names, the handler's
 * settle(actual) charges the tokens it spent, and with the service down the route still
 * answers (failOpen) and settle() resolves.
 */
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import t from "tap";
import { RingLimitClient } from "../../../src/client/index.js";
import { ringLimitExpress } from "../../../src/client/middleware/express.js";
import { ringLimitFastify } from "../../../src/client/middleware/fastify.js";
import { ringLimitHono } from "../../../src/client/middleware/hono.js";
import type { RouteCost } from "../../../src/client/middleware/route-cost.js";
import { clearOfWindowEnd } from "../../harness/contract.js";
import { TEST_KEY } from "../../harness/http-client.js";
import { spawnNode, type NodeProcess } from "../../harness/node-process.js";
import { freePort } from "../../harness/ports.js";

/**
 * /chat: 100 requests and 100 tokens an hour, named "requests" and "tokens"; the handler
 * answers, then settles the x-tokens it "spent". /plain: 2 and 1000 requests an hour, unnamed.
 * Every settle's promise goes to `settled`, so a test waits for the charge before the next request
 * (no wall-clock wait).
 */
type App = { url: string; settled: Promise<unknown>[]; close: () => Promise<void> };
type Serve = (client: RingLimitClient, tag: string) => Promise<App>;

const HOUR = 3600;
const header = (h: string | string[] | undefined | null) => (typeof h === "string" ? h : undefined);
const rules = (tag: string) => ({
  requests: { namespace: `${tag}-rpm`, limit: 100, duration: HOUR, policy: "requests" },
  tokens: { namespace: `${tag}-tph`, limit: 100, duration: HOUR, policy: "tokens", cost: "after" as const, estimate: 1 },
  plainA: { namespace: `${tag}-pa`, limit: 2, duration: HOUR },
  plainB: { namespace: `${tag}-pb`, limit: 1000, duration: HOUR },
});

async function listen(server: { address(): unknown }): Promise<string> {
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const frameworks: Record<string, Serve> = {
  async fastify(client, tag) {
    const settled: Promise<unknown>[] = [];
    const r = rules(tag);
    const key = (req: { headers: Record<string, string | string[] | undefined> }) => header(req.headers["x-user"]);
    const app = Fastify();
    await app.register(async (chat) => {
      await chat.register(ringLimitFastify, { client, ...r.requests, key });
      await chat.register(ringLimitFastify, { client, ...r.tokens, key });
      chat.get("/chat", async (request, reply) => {
        await reply.send({ route: "chat" });
        settled.push((request.ringlimit as RouteCost).settle(Number(request.headers["x-tokens"])));
        return reply;
      });
    });
    await app.register(async (plain) => {
      await plain.register(ringLimitFastify, { client, ...r.plainA, key });
      await plain.register(ringLimitFastify, { client, ...r.plainB, key });
      plain.get("/plain", async () => ({ route: "plain" }));
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    return { url: await listen(app.server), settled, close: () => app.close() };
  },
  async express(client, tag) {
    const settled: Promise<unknown>[] = [];
    const r = rules(tag);
    const key = (req: express.Request) => header(req.headers["x-user"]);
    const app = express();
    app.get("/chat", ringLimitExpress({ client, ...r.requests, key }), ringLimitExpress({ client, ...r.tokens, key }), (req, res) => {
      res.json({ route: "chat" });
      settled.push(res.locals.ringlimit!.settle(Number(req.headers["x-tokens"])));
    });
    app.get(
      "/plain",
      ringLimitExpress({ client, ...r.plainA, key }),
      ringLimitExpress({ client, ...r.plainB, key }),
      (_req, res) => void res.json({ route: "plain" }),
    );
    const server = await new Promise<ReturnType<typeof app.listen>>((resolve) => {
      const s = app.listen(0, "127.0.0.1", () => resolve(s));
    });
    return { url: await listen(server), settled, close: () => new Promise((done) => server.close(() => done())) };
  },
  async hono(client, tag) {
    const settled: Promise<unknown>[] = [];
    const r = rules(tag);
    const key = (c: { req: { header(name: string): string | undefined } }) => c.req.header("x-user");
    const app = new Hono();
    app.get("/chat", ringLimitHono({ client, ...r.requests, key }), ringLimitHono({ client, ...r.tokens, key }), async (c) => {
      const res = c.json({ route: "chat" });
      settled.push(c.get("ringlimit").settle(Number(c.req.header("x-tokens"))));
      return res;
    });
    app.get("/plain", ringLimitHono({ client, ...r.plainA, key }), ringLimitHono({ client, ...r.plainB, key }), (c) => c.json({ route: "plain" }));
    const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
      const s = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s));
    });
    return { url: await listen(server), settled, close: () => new Promise((done) => server.close(() => done())) };
  },
};

async function get(url: string, headers: Record<string, string>) {
  const r = await fetch(url, { headers });
  return { status: r.status, headers: r.headers, json: (await r.json()) as Record<string, unknown> };
}

let node: NodeProcess;
t.before(async () => {
  node = await spawnNode({});
});
t.teardown(() => node.kill());

for (const [name, start] of Object.entries(frameworks)) {
  t.test(name, async (t) => {
    const client = new RingLimitClient({ urls: node.url, apiKey: TEST_KEY, timeoutMs: 5000 });
    const app = await start(client, `cost-${name}`);
    t.teardown(async () => {
      await app.close();
      await client.close();
    });

    await t.test("requests and tokens both apply; the tokens are charged after the response", async (t) => {
      await clearOfWindowEnd(HOUR, 30_000);
      const ask = async (tokens: number) => {
        const r = await get(app.url + "/chat", { "x-user": "alice", "x-tokens": String(tokens) });
        await Promise.all(app.settled.splice(0));
        return r;
      };
      const first = await ask(60);
      t.same([first.status, first.json], [200, { route: "chat" }]);
      t.equal(first.headers.get("ratelimit-policy"), '"requests";q=100;w=3600, "tokens";q=100;w=3600', "one item per limit, by name");
      t.match(first.headers.get("ratelimit"), /^"requests";r=99;t=\d+, "tokens";r=99;t=\d+$/);
      // 60 tokens spent: the estimate of 1 fits, then 59 more are charged (120 of 100: in debt).
      const second = await ask(60);
      t.equal(second.status, 200);
      t.match(second.headers.get("ratelimit"), /^"requests";r=98;t=\d+, "tokens";r=39;t=\d+$/, "the first answer's 60 tokens were counted");
      const third = await ask(1);
      t.equal(third.status, 429, "the tokens spent block the next request, though requests remain");
      t.match(third.headers.get("ratelimit"), /^"requests";r=97;t=\d+, "tokens";r=0;t=\d+$/);
      t.match(third.json, { error: "Rate limit exceeded", limit: 100, remaining: 0 });
      t.equal((await get(app.url + "/chat", { "x-user": "bob", "x-tokens": "1" })).status, 200, "another key has its own budget");
      await Promise.all(app.settled.splice(0));
    });

    await t.test("two unnamed limits get distinct names, and the stricter blocks", async (t) => {
      await clearOfWindowEnd(HOUR, 30_000);
      const statuses: number[] = [];
      let policy: string | null = null;
      for (let i = 0; i < 3; i++) {
        const r = await get(app.url + "/plain", { "x-user": "carol" });
        statuses.push(r.status);
        policy ??= r.headers.get("ratelimit-policy");
      }
      t.same(statuses, [200, 200, 429]);
      t.equal(policy, '"fixed-window";q=2;w=3600, "fixed-window-2";q=1000;w=3600');
    });

    await t.test("the service unreachable: failOpen lets the route answer, and settle() resolves", async (t) => {
      const down = new RingLimitClient({ urls: `http://127.0.0.1:${await freePort()}`, apiKey: TEST_KEY, timeoutMs: 1000, failOpen: true });
      const downApp = await start(down, `cost-${name}-down`);
      const r = await get(downApp.url + "/chat", { "x-user": "dave", "x-tokens": "5" });
      const results = (await Promise.all(downApp.settled.splice(0))) as { counted: unknown }[][];
      await downApp.close();
      await down.close();
      t.same([r.status, r.json], [200, { route: "chat" }], "fail open: the handler ran");
      t.equal(results.length, 1);
      t.equal(results[0]!.length, 1, "one reservation settled (the tokens rule)");
      t.not(results[0]![0]!.counted, true, "no node took the charge");
    });
  });
}

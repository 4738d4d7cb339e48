/**
 * The middleware for Fastify, Express and Hono, each in the real framework on a real port,
 * checking through a RingLimitClient against a real ringlimit node process: per-route
 * limits, the IETF headers and Retry-After passed through, a 429 with a JSON body, requests
 * without a key left alone, and the client's failOpen when the service is down.
 */
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import t from "tap";
import { RingLimitClient } from "../../src/client/index.js";
import { ringLimitExpress } from "../../src/client/middleware/express.js";
import { ringLimitFastify } from "../../src/client/middleware/fastify.js";
import { ringLimitHono } from "../../src/client/middleware/hono.js";
import { clearOfWindowEnd } from "../harness/contract.js";
import { TEST_KEY } from "../harness/http-client.js";
import { spawnNode, type NodeProcess } from "../harness/node-process.js";
import { freePort } from "../harness/ports.js";

/**
 * A framework app on a free port with routes /a (2 per hour), /b (5 per hour) and /free (not limited).
 * An hour, with clearOfWindowEnd before the counting tests: a minute's window could end between
 * the 2nd and 3rd request and turn the expected 429 into a 200.
 */
type Serve = (client: RingLimitClient, tag: string) => Promise<{ url: string; close: () => Promise<void> }>;

const userOf = (header: string | string[] | undefined | null) => (typeof header === "string" ? header : undefined);

const frameworks: Record<string, Serve> = {
  async fastify(client, tag) {
    const app = Fastify();
    await app.register(ringLimitFastify, { client, namespace: `${tag}-b`, limit: 5, duration: 3600, key: (req) => userOf(req.headers["x-user"]) });
    app.get("/a", { config: { ringlimit: { namespace: `${tag}-a`, limit: 2 } } }, async () => ({ route: "a" }));
    app.get("/b", async () => ({ route: "b" }));
    app.get("/free", { config: { ringlimit: false } }, async () => ({ route: "free" }));
    await app.listen({ host: "127.0.0.1", port: 0 });
    return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, close: () => app.close() };
  },
  async express(client, tag) {
    const app = express();
    const key = (req: express.Request) => userOf(req.headers["x-user"]);
    app.get("/a", ringLimitExpress({ client, namespace: `${tag}-a`, limit: 2, duration: 3600, key }), (_req, res) => void res.json({ route: "a" }));
    app.get("/b", ringLimitExpress({ client, namespace: `${tag}-b`, limit: 5, duration: 3600, key }), (_req, res) => void res.json({ route: "b" }));
    app.get("/free", (_req, res) => void res.json({ route: "free" }));
    const server = await new Promise<ReturnType<typeof app.listen>>((resolve) => {
      const s = app.listen(0, "127.0.0.1", () => resolve(s));
    });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((r) => server.close(() => r())) };
  },
  async hono(client, tag) {
    const app = new Hono();
    const key = (c: { req: { header(name: string): string | undefined } }) => c.req.header("x-user");
    app.get("/a", ringLimitHono({ client, namespace: `${tag}-a`, limit: 2, duration: 3600, key }), (c) => c.json({ route: "a" }));
    app.get("/b", ringLimitHono({ client, namespace: `${tag}-b`, limit: 5, duration: 3600, key }), (c) => c.json({ route: "b" }));
    app.get("/free", (c) => c.json({ route: "free" }));
    const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
      const s = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s));
    });
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: () => new Promise((r) => server.close(() => r())),
    };
  },
};

async function get(url: string, user?: string) {
  const r = await fetch(url, { headers: user === undefined ? {} : { "x-user": user } });
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
    const app = await start(client, name);
    t.teardown(async () => {
      await app.close();
      await client.close();
    });

    await t.test("per-route limits, the IETF headers passed through, then 429 with Retry-After and JSON", async (t) => {
      await clearOfWindowEnd(3600, 30_000);
      const a1 = await get(app.url + "/a", "alice");
      const a2 = await get(app.url + "/a", "alice");
      const a3 = await get(app.url + "/a", "alice");
      t.same([a1.status, a2.status, a3.status], [200, 200, 429]);
      t.same(a1.json, { route: "a" }, "the handler ran");
      t.equal(a1.headers.get("ratelimit-policy"), '"fixed-window";q=2;w=3600');
      t.match(a1.headers.get("ratelimit"), /^"fixed-window";r=1;t=\d+$/);
      t.match(a2.headers.get("ratelimit"), /^"fixed-window";r=0;t=\d+$/);
      t.match(a3.headers.get("ratelimit"), /^"fixed-window";r=0;t=\d+$/);
      t.match(a3.headers.get("retry-after"), /^\d+$/);
      t.match(a3.headers.get("content-type"), /^application\/json/);
      t.match(a3.json, { error: "Rate limit exceeded", status: 429, limit: 2, remaining: 0 });
      t.ok((a3.json.retry_after as number) > 0 && (a3.json.retry_after as number) <= 3600);
      t.equal(a1.headers.get("retry-after"), null, "no Retry-After on an allowed request");

      const b = await get(app.url + "/b", "alice");
      t.equal(b.status, 200, "another route has its own limit");
      t.equal(b.headers.get("ratelimit-policy"), '"fixed-window";q=5;w=3600');
      t.equal((await get(app.url + "/a", "bob")).status, 200, "another key has its own count");
    });

    await t.test("a request without a key, or on an unlimited route, is left alone", async (t) => {
      for (let i = 0; i < 4; i++) {
        const r = await get(app.url + "/a");
        t.equal(r.status, 200);
        t.equal(r.headers.get("ratelimit"), null);
      }
      const free = await get(app.url + "/free", "alice");
      t.equal(free.status, 200);
      t.equal(free.headers.get("ratelimit"), null);
    });

    await t.test("a key longer than the service accepts is still limited (by its hash)", async (t) => {
      await clearOfWindowEnd(3600, 30_000);
      const long = "k".repeat(2000);
      t.same([(await get(app.url + "/a", long)).status, (await get(app.url + "/a", long)).status, (await get(app.url + "/a", long)).status], [200, 200, 429]);
    });

    await t.test("the service unreachable: failOpen true lets requests through, false answers 503", async (t) => {
      const nowhere = `http://127.0.0.1:${await freePort()}`;
      for (const failOpen of [true, false]) {
        const down = new RingLimitClient({ urls: nowhere, apiKey: TEST_KEY, timeoutMs: 1000, failOpen });
        const downApp = await start(down, `${name}-down`);
        const r = await get(downApp.url + "/a", "carol");
        await downApp.close();
        await down.close();
        if (failOpen) t.same([r.status, r.json], [200, { route: "a" }], "fail open: the handler ran");
        else t.match([r.status, r.json], [503, { error: "Rate limit check unavailable" }], "fail closed: 503");
      }
    });
  });
}

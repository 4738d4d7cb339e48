/**
 * Concurrency through the client and the middleware, against a real node (in this process)
 * and each framework on a real port: acquire() holds a slot and release() frees it once; a
 * route with `concurrency: true` admits `limit` requests in flight and frees each slot when
 * its response is done, an error response included.
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
import { TEST_KEY } from "../harness/http-client.js";
import { useTestNode } from "../harness/in-process-node.js";
import { uniqueId } from "../harness/contract.js";

const node = useTestNode(t);
let client: RingLimitClient;
t.before(() => {
  client = new RingLimitClient({ urls: node.url, apiKey: TEST_KEY, timeoutMs: 5000 });
});
t.teardown(() => client?.close());

t.test("acquire() holds a slot; release() frees it, once", async (t) => {
  const key = { namespace: "client-conc", identifier: uniqueId("acq"), limit: 1, duration: 3600 };
  const a = await client.acquire(key);
  t.equal(a.allowed, true);
  t.type(a.result.data?.lease, "string");
  const b = await client.acquire(key);
  t.equal(b.allowed, false, "the one slot is held");
  await b.release(); // nothing held: nothing sent
  await Promise.all([a.release(), a.release()]);
  const c = await client.acquire(key);
  t.equal(c.allowed, true, "freed by the release");
  t.equal((await client.acquire(key)).allowed, false, "and only one slot freed");
  await c.release();
});

/** A gate each handler waits on, so requests stay in flight until the test opens it. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

type Start = (ns: string, wait: () => Promise<void>) => Promise<{ url: string; close: () => Promise<void> }>;
const user = (h: string | string[] | undefined | null) => (typeof h === "string" ? h : undefined);

const frameworks: Record<string, Start> = {
  async fastify(ns, wait) {
    const app = Fastify();
    await app.register(ringLimitFastify, { client, namespace: ns, limit: 2, duration: 3600, concurrency: true, key: (req) => user(req.headers["x-user"]) });
    app.get("/slow", async () => {
      await wait();
      return { ok: true };
    });
    app.get("/fail", async () => {
      throw new Error("handler failed");
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, close: () => app.close() };
  },
  async express(ns, wait) {
    const app = express();
    const limitIt = ringLimitExpress({ client, namespace: ns, limit: 2, duration: 3600, concurrency: true, key: (req) => user(req.headers["x-user"]) });
    app.get("/slow", limitIt, (_req, res) => void wait().then(() => res.json({ ok: true })));
    app.get("/fail", limitIt, () => {
      throw new Error("handler failed");
    });
    const server = await new Promise<ReturnType<typeof app.listen>>((resolve) => {
      const s = app.listen(0, "127.0.0.1", () => resolve(s));
    });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((r) => server.close(() => r())) };
  },
  async hono(ns, wait) {
    const app = new Hono();
    const limitIt = ringLimitHono({ client, namespace: ns, limit: 2, duration: 3600, concurrency: true, key: (c) => c.req.header("x-user") });
    app.get("/slow", limitIt, async (c) => {
      await wait();
      return c.json({ ok: true });
    });
    app.get("/fail", limitIt, () => {
      throw new Error("handler failed");
    });
    const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
      const s = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s));
    });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((r) => server.close(() => r())) };
  },
};

for (const [name, start] of Object.entries(frameworks)) {
  t.test(`${name}: concurrency: true admits 2 in flight and releases on finish and on error`, async (t) => {
    let g = gate();
    // Only the first two requests a handler sees wait at the gate: a third let through (over the
    // limit) answers at once and fails the test, where it would hang there until the timeout.
    let entered = 0;
    let bothIn!: () => void;
    const twoEntered = new Promise<void>((r) => (bothIn = r));
    const app = await start(uniqueId(name), () => {
      entered++;
      if (entered === 2) bothIn();
      return entered <= 2 ? g.opened : Promise.resolve();
    });
    t.teardown(() => app.close());
    const get = (path: string) => fetch(app.url + path, { headers: { "x-user": "u1" } });
    const inFlight = [get("/slow"), get("/slow")];
    // Both hold a slot once their handlers run (the node counted them): only then is a third
    // refused. Sent before, a third could take a slot the second had not yet (a CI run hung so).
    await Promise.race([twoEntered, Promise.all(inFlight)]);
    t.equal(entered, 2, "both in flight reached their handler");
    let third: Response | undefined;
    for (let i = 0; i < 100 && third?.status !== 429; i++) {
      third = await get("/slow").catch(() => undefined);
      if (third?.status === 200) t.fail("a third request went through while two were in flight");
    }
    t.equal(third?.status, 429, "a third in flight is refused");
    t.ok(Number(third?.headers.get("retry-after")) >= 1);
    g.open();
    t.same(
      (await Promise.all(inFlight)).map((r) => r.status),
      [200, 200],
    );
    g = gate();
    g.open();
    // Released on finish: both slots are free again (the release may still be on its way).
    let ok = 0;
    for (let i = 0; i < 100 && ok < 1; i++) if ((await get("/slow")).status === 200) ok++;
    t.equal(ok, 1, "slots freed after the responses finished");
    // An error response releases too: failing requests in a row never run out of slots (a
    // release is sent after the response, so a request may find it still on its way: retried).
    for (let i = 0; i < 6; i++) {
      let r = await get("/fail");
      for (let tries = 0; r.status === 429 && tries < 200; tries++) {
        await new Promise((res) => setTimeout(res, 10));
        r = await get("/fail");
      }
      t.equal(r.status, 500, `failure ${i}: the handler's error, not a 429`);
    }
  });
}

/**
 * The client against a cluster that stops (issue #41, item 5): every node of a real two-node
 * cluster is stopped with SIGTERM, then started again on its ports. While no node answers,
 * checks are the client's own answers (failOpen), the logger hears it once, `onDegraded` is
 * called once, and an Express route with two limits (a per-address limit and a concurrency
 * limit) keeps both items in RateLimit and RateLimit-Policy, marked `degraded`. When a node
 * answers again: one more warning, one more call, and the items are the nodes' again.
 */
import type { AddressInfo } from "node:net";
import express from "express";
import t from "tap";
import { RingLimitClient, type DegradedEvent } from "../../src/client/index.js";
import { ringLimitExpress } from "../../src/client/middleware/express.js";
import { startCluster } from "../harness/cluster.js";
import { closeAgents, request, TEST_KEY } from "../harness/http-client.js";
import { until } from "../harness/wait.js";

t.teardown(closeAgents);

t.test("a stopped cluster: one warning and one onDegraded each way, every limit's headers kept and marked degraded", async (t) => {
  const cluster = await startCluster(2);
  t.teardown(() => cluster.stop());
  const warnings: { details: Record<string, unknown>; message: string }[] = [];
  const events: DegradedEvent[] = [];
  const client = new RingLimitClient({
    urls: cluster.nodes.map((n) => n!.url),
    apiKey: TEST_KEY,
    timeoutMs: 500,
    retryNodeAfterMs: 100,
    logger: { warn: (details, message) => void warnings.push({ details, message }) },
    onDegraded: (event) => void events.push(event),
  });
  t.teardown(() => client.close());
  await client.ready();

  const app = express();
  app.get(
    "/chat",
    ringLimitExpress({ client, namespace: "degraded-ip", limit: 100, duration: 3600, policy: "ip", key: (req) => req.ip }),
    ringLimitExpress({ client, namespace: "degraded-slots", limit: 5, duration: 30, concurrency: true, policy: "slots", key: () => "tenant-1" }),
    (_req, res) => void res.json({ ok: true }),
  );
  const server = await new Promise<ReturnType<typeof app.listen>>((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/chat`;
  const get = async () => {
    const r = await request(url);
    return { status: r.status, policy: String(r.headers["ratelimit-policy"]), limits: String(r.headers["ratelimit"]) };
  };
  const down = () => warnings.filter((w) => /no ringlimit node answers/.test(w.message));
  const back = () => warnings.filter((w) => /answers again after \d+ ms/.test(w.message));

  const up = await get();
  t.equal(up.status, 200);
  t.match(up.limits, /^"ip";r=\d+;t=\d+, "slots";r=\d+;t=\d+$/, "both limits' items, from the nodes");
  t.notMatch(up.limits + up.policy, /degraded/);
  t.same(events, [], "no call while the cluster answers");

  // Every node stopped by a real signal: each drains and exits, its ports closed.
  for (const node of cluster.nodes) node!.signal("SIGTERM");
  await Promise.all(cluster.nodes.map((n) => n!.exited));

  const answers = [];
  for (let i = 0; i < 6; i++) answers.push(await get());
  for (const [i, a] of answers.entries()) {
    t.equal(a.status, 200, `request ${i} admitted (failOpen)`);
    t.equal(a.policy, '"ip";q=100;w=3600;degraded, "slots";q=5;w=30;degraded', `request ${i}: every configured limit's policy, marked degraded`);
    t.equal(a.limits, '"ip";r=100;degraded, "slots";r=5;degraded', `request ${i}: every limit's item, nothing counted, marked degraded`);
  }
  // Six requests, two checks each, all answered by the client: one warning, one call.
  t.equal(down().length, 1, "one warning that the cluster is down");
  t.match(down()[0]!.message, /ALLOWED unchecked \(failOpen: true\)/);
  t.equal(events.length, 1, "onDegraded called once");
  t.match(events[0], { degraded: true, answeredByClient: 0 });
  t.ok(events[0]!.reason === "timeout" || events[0]!.reason === "unavailable", `a reason: ${events[0]!.reason}`);
  t.equal(back().length, 0);

  // Started again on the same ports, together: a member with static PEERS is ready only once it
  // has reached a majority of them (docs/operations.md), so one at a time would wait forever.
  // The client finds them on its own.
  await Promise.all(cluster.nodes.map((_, i) => cluster.restart(i)));
  await until(
    "a check decided by a node again",
    async () => !(await client.limit({ namespace: "degraded-probe", identifier: "p", limit: 1000, duration: 3600 })).degraded,
    60_000,
    200,
  );
  t.equal(back().length, 1, "one warning that it is back");
  t.equal(events.length, 2, "onDegraded called once more");
  t.match(events[1], { degraded: false, reason: undefined, since: events[0]!.since });
  t.ok(events[1]!.answeredByClient >= 12, `the outage's checks answered by the client: ${events[1]!.answeredByClient}`);
  t.equal(down().length, 1, "and no second warning that it is down");

  const again = await get();
  t.equal(again.status, 200);
  t.match(again.limits, /^"ip";r=\d+;t=\d+, "slots";r=\d+;t=\d+$/, "the nodes' items again");
  t.notMatch(again.limits + again.policy, /degraded/);
  t.notOk(JSON.stringify(warnings).includes(TEST_KEY), "the API key is never logged");
});

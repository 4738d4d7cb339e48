/**
 * RingLimitClient against a real 3-node cluster (separate processes, real TCP): it finds
 * the members from one URL, sends each check to its key's owner (the nodes forward
 * nothing), stays exact, follows the ring through a death and a rejoin, answers with its
 * own fail-open or fail-closed answer when every node is down, and gives up on a socket
 * that accepts and never answers after timeoutMs.
 */
import net from "node:net";
import t from "tap";
import { RingLimitClient } from "../../src/client/index.js";
import { clearOfWindowEnd } from "../harness/contract.js";
import { closeAgents, request, TEST_KEY } from "../harness/http-client.js";
import { metric, startCluster, waitForRing, type TestCluster } from "../harness/cluster.js";
import type { NodeProcess } from "../harness/node-process.js";
import { sleep, until } from "../harness/wait.js";
import { ALGORITHM_NAMES } from "../../src/algorithms/index.js";

t.teardown(closeAgents);

const forwarded = (n: NodeProcess) => Promise.all(["allowed", "blocked"].map((o) => metric(n, "ringlimit_forwarded_total", `{outcome="${o}"}`)));

async function clusterVersion(node: NodeProcess): Promise<string> {
  return (await request(node.url + "/cluster", { headers: { authorization: `Bearer ${TEST_KEY}` } })).json.data.ring_version;
}

/** Until every member's URL is known to `node` (exchanged when peers come up). */
async function urlsKnown(node: NodeProcess, size: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const data = (await request(node.url + "/cluster", { headers: { authorization: `Bearer ${TEST_KEY}` } })).json.data;
    if (data.members.length === size && data.members.every((m: { url: string | null }) => m.url !== null)) return;
    if (Date.now() > deadline) throw new Error("member URLs not known: " + JSON.stringify(data));
    await sleep(50);
  }
}

t.test("3 nodes through the client", async (t) => {
  const cluster: TestCluster = await startCluster(3);
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes.map((n) => n!);
  await Promise.all(nodes.map((n) => urlsKnown(n, 3)));
  // A generous deadline: two shared cores run several suites at once, and only the test of
  // timeouts below is about the deadline.
  const client = new RingLimitClient({ urls: nodes[0]!.url, apiKey: TEST_KEY, timeoutMs: 5000 });
  t.teardown(() => client.close());

  await t.test("seeded with one URL, it learns the ring", async (t) => {
    await client.ready();
    t.equal(client.ringVersion, await clusterVersion(nodes[1]!));
    t.ok(client.stats.refreshes >= 1);
  });

  await t.test("every check goes to its key's owner: no node forwards", async (t) => {
    const before = await Promise.all(nodes.map(forwarded));
    const ids = [0, 1, 2].flatMap((owner) => [0, 1, 2, 3].map((i) => cluster.identifierOwnedBy(owner, `route${i}`)));
    for (const id of ids) {
      const r = await client.limit({ namespace: "test", identifier: id, limit: 100, duration: 3600 });
      t.equal(r.status, 200, id);
      t.equal(r.source, "owner", `${id} answered by its owner`);
      t.equal(r.data?.identifier, id);
    }
    t.same(await Promise.all(nodes.map(forwarded)), before, "forwarded counters unchanged on every node");
    const owners = new Set(ids.map((id) => cluster.ownerOf("test", id)));
    t.equal(owners.size, 3, "the keys covered all three owners");
  });

  await t.test("a product's slug is part of the owner's key", async (t) => {
    const before = await Promise.all(nodes.map(forwarded));
    for (let i = 0; i < 12; i++) {
      const r = await client.limit({ namespace: "shop", product: "Café Pro!", identifier: `p${i}`, limit: 5, duration: 60 });
      t.equal(r.data?.namespace, "shop.cafe-pro");
      t.equal(r.source, "owner");
    }
    t.same(await Promise.all(nodes.map(forwarded)), before);
  });

  await t.test("exact under concurrency: limit 100 of 300 parallel checks, each algorithm", async (t) => {
    for (const algorithm of ALGORITHM_NAMES) {
      const results = await Promise.all(
        Array.from({ length: 300 }, () => client.limit({ namespace: "exact", identifier: algorithm, limit: 100, duration: 31536000, algorithm })),
      );
      t.equal(results.filter((r) => r.allowed).length, 100, `${algorithm}: 100 allowed`);
      t.equal(results.filter((r) => r.degraded).length, 0, "none degraded");
      t.same(
        results
          .filter((r) => r.allowed)
          .map((r) => r.data!.count)
          .sort((a, b) => a! - b!),
        Array.from({ length: 100 }, (_, i) => i + 1),
        "counts 1..100",
      );
      t.ok(
        results.filter((r) => !r.allowed).every((r) => r.status === 429 && r.headers["retry-after"] !== undefined),
        "the rest 429 with Retry-After",
      );
    }
  });

  await t.test("a 429 is remembered until retry_after", async (t) => {
    const req = { namespace: "cache", identifier: "c1", limit: 1, duration: 1 };
    await until("the start of a second", () => Date.now() % 1000 < 300);
    t.equal((await client.limit(req)).status, 200);
    const blocked = await client.limit(req);
    t.equal(blocked.status, 429);
    t.not(blocked.source, "cache");
    const before = client.stats.cachedBlocks;
    const cached = await client.limit(req);
    t.equal(cached.status, 429);
    t.equal(cached.source, "cache");
    t.equal(client.stats.cachedBlocks, before + 1);
    t.ok(cached.data!.retry_after! > 0 && cached.data!.retry_after! <= 1);
    t.match(cached.headers, { "ratelimit-policy": '"fixed-window";q=1;w=1', "retry-after": "1" });
    await sleep(cached.data!.retry_after! * 1000 + 5);
    const again = await client.limit(req);
    t.equal(again.status, 200, "allowed once retry_after has passed");
    t.not(again.source, "cache");
  });

  await t.test("batch: all or nothing, sent to the owner when one member owns every item", async (t) => {
    const id = cluster.identifierOwnedBy(1, "batch");
    const item = { namespace: "test", identifier: id, limit: 3, duration: 3600 };
    await clearOfWindowEnd(item.duration, 30_000);
    const ok = await client.batch([item, { ...item, cost: 2 }]);
    t.match(ok, { allowed: true, degraded: false, status: 200, source: "owner" });
    t.same(
      ok.data?.results?.map((r) => r.count),
      [1, 3],
    );
    const no = await client.batch([item]);
    t.match(no, { allowed: false, status: 429 });
    t.ok(no.data!.retry_after! > 0);
  });

  await t.test("reset: the owner removes the states, and the client forgets its remembered 429", async (t) => {
    const req = { namespace: "test", identifier: cluster.identifierOwnedBy(2, "reset"), limit: 1, duration: 3600 };
    await clearOfWindowEnd(req.duration, 30_000);
    t.equal((await client.limit(req)).status, 200);
    t.equal((await client.limit(req)).status, 429);
    t.equal((await client.limit(req)).source, "cache");
    const r = await client.reset({ namespace: "test", identifier: req.identifier });
    t.match(r, { ok: true, status: 200, source: "owner" });
    t.same(r.data?.removed, [{ algorithm: "fixed-window", duration: 3600 }]);
    const after = await client.limit(req);
    t.match(after, { status: 200, source: "owner" }, "allowed again, asked of the owner");
  });

  await t.test("a member dies and comes back while checks run: nothing rejects, routing follows the ring", async (t) => {
    const ids = Array.from({ length: 60 }, (_, i) => `churn-${i}`);
    let running = true;
    const sources: Record<string, number> = {};
    let checks = 0;
    let batches = 0;
    const loop = (async () => {
      while (running) {
        const results = await Promise.all(ids.map((id) => client.limit({ namespace: "test", identifier: id, limit: 1_000_000, duration: 3600 })));
        for (const r of results) {
          sources[r.source] = (sources[r.source] ?? 0) + 1;
          checks++;
        }
        batches++;
      }
    })();
    // Checks already in flight were routed by the ring of their start: wait for whole batches.
    const nextBatches = async (n: number) => {
      const target = batches + n;
      await until(`${n} more batches`, () => batches >= target);
    };
    await sleep(300);
    const versionBefore = client.ringVersion;
    await nodes[2]!.kill();
    await waitForRing(nodes.slice(0, 2), 2);
    await until(
      "the client to drop the dead member",
      async () => client.ringVersion === (await clusterVersion(nodes[0]!)) && client.ringVersion !== versionBefore,
    );
    await nextBatches(2);
    const fallbackAfterDeath = client.stats.fallback;
    await nextBatches(3);
    t.equal(client.stats.fallback, fallbackAfterDeath, "on the 2-member ring every check goes to its owner again");

    nodes[2] = await cluster.restart(2);
    await waitForRing(nodes, 3);
    await Promise.all(nodes.map((n) => urlsKnown(n, 3)));
    await until("the client to see the member back", async () => client.ringVersion === (await clusterVersion(nodes[0]!)));
    t.equal(client.ringVersion, versionBefore, "the same three members: the same version as before");
    await nextBatches(2);
    const before = await Promise.all(nodes.map(forwarded));
    const fallbackBack = client.stats.fallback;
    await nextBatches(3);
    running = false;
    await loop;
    t.equal(client.stats.fallback, fallbackBack, "back on the 3-member ring: owners only");
    t.same(await Promise.all(nodes.map(forwarded)), before, "and the nodes forward nothing");
    t.ok(checks > ids.length * 5, `${checks} checks ran through the change (${JSON.stringify(sources)})`);
  });

  await t.test("every node down: the client's own answer, failOpen true and false", async (t) => {
    const closed = new RingLimitClient({ urls: nodes.map((n) => n.url), apiKey: TEST_KEY, timeoutMs: 5000, failOpen: false });
    t.teardown(() => closed.close());
    await closed.ready();
    t.equal((await closed.limit({ namespace: "down", identifier: "x", limit: 5, duration: 60 })).status, 200);
    await cluster.stop();
    for (const [c, failOpen] of [
      [client, true],
      [closed, false],
    ] as const) {
      const timeouts = c.stats.timeouts;
      const started = performance.now();
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => c.limit({ namespace: "down", identifier: `x${i}`, limit: 5, duration: 60 })));
      const ms = performance.now() - started;
      for (const r of results) t.match(r, { allowed: failOpen, degraded: true, status: 0, source: "client" });
      t.equal(c.stats.timeouts, timeouts, `failOpen ${failOpen}: refused connections answer at once (${ms.toFixed(1)} ms for 20), not at the deadline`);
      t.ok(c.stats.unavailable >= 20);
      t.match(await c.reset({ namespace: "down", identifier: "x0" }), { ok: false, status: 0, source: "client" }, "a reset never fails open");
    }
  });
});

t.test("a node that accepts and never answers: degraded after timeoutMs, then skipped", async (t) => {
  const sockets = new Set<net.Socket>();
  const silent = net.createServer((s) => {
    sockets.add(s);
    s.on("error", () => {});
  });
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    silent.close();
  });
  const url = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
  for (const failOpen of [true, false]) {
    // discoveryWaitMs 0: sent at once, not after waiting for a GET /cluster that never answers either.
    const client = new RingLimitClient({ urls: url, apiKey: TEST_KEY, timeoutMs: 50, failOpen, discoveryWaitMs: 0 });
    const started = performance.now();
    const r = await client.limit({ namespace: "silent", identifier: "x", limit: 5, duration: 60 });
    const ms = performance.now() - started;
    t.match(r, { allowed: failOpen, degraded: true, status: 0, source: "client" });
    // Not early; late only by what a loaded machine adds (typically 1-3 ms here).
    t.ok(ms >= 49 && ms < 1000, `resolved after ${ms.toFixed(1)} ms (timeoutMs 50)`);
    t.equal(client.stats.timeouts, 1);
    // The silent node is now skipped: with no other node, the next check is answered at once.
    const r2 = await client.limit({ namespace: "silent", identifier: "y", limit: 5, duration: 60 });
    t.match(r2, { allowed: failOpen, degraded: true });
    t.equal(client.stats.timeouts, 1, "a skipped node is not waited for again");
    t.equal(client.stats.unavailable, 1);
    await client.close();
  }
  t.ok(sockets.size >= 1, "the silent server did accept connections");
});

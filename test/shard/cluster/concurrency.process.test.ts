/**
 * Concurrency limits on a ring of three real node processes, asked round-robin as a Service
 * would: exactly `limit` holders at once whichever node they ask, releases on any node free
 * slots (once), unreleased leases lapse on time, and with REPLICAS=2 the held slots survive
 * the owner's SIGKILL: the promoted replica does not hand them out again undegraded.
 */
import t from "tap";
import { metric, startCluster, waitForRing } from "../../harness/cluster.js";
import { limit, post, type Reply } from "../../harness/http-client.js";
import type { NodeProcess } from "../../harness/node-process.js";
import { eventually, sleep } from "../../harness/wait.js";

const key = (identifier: string, lim: number, duration = 3600) => ({ namespace: "test", identifier, limit: lim, duration, algorithm: "concurrency" });

t.test("three nodes round-robin: exactly `limit` holders, releases anywhere, lapses on time, held slots survive the owner's SIGKILL", async (t) => {
  const cluster = await startCluster(3, { REPLICAS: "2" });
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes as NodeProcess[];
  let next = 0;
  const any = () => nodes[next++ % nodes.length]!;

  t.test("exactly `limit` of 30 concurrent acquirers, over all three nodes", async (t) => {
    const k = key(cluster.identifierOwnedBy(1, "conc-admit"), 7);
    const replies = await Promise.all(Array.from({ length: 30 }, () => limit(any().url, k)));
    const allowed = replies.filter((r) => r.status === 200);
    t.equal(allowed.length, 7, "7 holders");
    t.equal(replies.filter((r) => r.status === 429).length, 23, "the rest refused");
    t.ok(
      allowed.every((r) => r.json.data.degraded === undefined && typeof r.json.data.lease === "string"),
      "every holder has a lease, none degraded",
    );

    // Released round-robin (each on another node than it was taken by, most of them), then once more.
    const released = await Promise.all(allowed.slice(0, 4).map((r) => post(any().url, "/limit/release", { ...k, lease: r.json.data.lease })));
    t.same(
      released.map((r) => r.json.data.released),
      [true, true, true, true],
      "four released, on any node",
    );
    const twice = await Promise.all(allowed.slice(0, 4).map((r) => post(any().url, "/limit/release", { ...k, lease: r.json.data.lease })));
    t.same(
      twice.map((r) => [r.status, r.json.data.released]),
      Array(4).fill([200, false]),
      "a second release frees nothing, whichever node it reaches",
    );
    const again = await Promise.all(Array.from({ length: 10 }, () => limit(any().url, k)));
    t.equal(again.filter((r) => r.status === 200).length, 4, "exactly the four freed slots are taken again");
  });

  t.test("an unreleased lease lapses on time: its slot comes back by itself", async (t) => {
    const k = key(cluster.identifierOwnedBy(2, "conc-lapse"), 2, 2);
    t.equal((await limit(any().url, k)).status, 200);
    t.equal((await limit(any().url, k)).status, 200);
    const full = await limit(any().url, k);
    t.equal(full.status, 429);
    // A 2 s lease lapses 2 to 3 s after it was taken (buckets of 1 s).
    t.ok(full.json.data.retry_after > 0 && full.json.data.retry_after <= 3, `retry_after ${full.json.data.retry_after}`);
    await sleep(full.json.data.retry_after * 1000 + 5);
    const back = await limit(any().url, k);
    t.equal(back.status, 200, "free again after retry_after, on whichever node");
  });

  t.test("REPLICAS=2: held slots survive the owner's SIGKILL", async (t) => {
    const owner = nodes[0]!;
    const k = key(cluster.identifierOwnedBy(0, "conc-kill"), 3);
    const others = [nodes[1]!, nodes[2]!];
    const held: Reply[] = [];
    for (let i = 0; i < 3; i++) held.push(await limit(others[i % 2]!.url, k));
    t.same(
      held.map((r) => r.status),
      [200, 200, 200],
      "three slots held",
    );
    t.ok(
      await eventually(async () => (await Promise.all(nodes.map((n) => metric(n, "ringlimit_replication_backlog_states")))).every((v) => v === 0), 10_000),
      "replicated",
    );
    owner.signal("SIGKILL");
    await owner.exited;
    await waitForRing(others, 2);
    const after = await Promise.all(Array.from({ length: 6 }, (_, i) => limit(others[i % 2]!.url, k)));
    t.equal(after.filter((r) => r.status === 200 && r.json.data.degraded === undefined).length, 0, "no held slot handed out again undegraded");
    // The promoted copy holds the leases: a release on a survivor frees one, which is then taken once.
    const r = await post(others[0]!.url, "/limit/release", { ...k, lease: held[0]!.json.data.lease });
    t.equal(r.status, 200);
    t.equal(r.json.data.released, true, "a lease granted by the dead owner is released on the new one");
    const taken = await Promise.all(Array.from({ length: 4 }, (_, i) => limit(others[i % 2]!.url, k)));
    t.equal(taken.filter((x) => x.status === 200).length, 1, "exactly the freed slot");
  });
});

/**
 * Cost, peek, batches and reset on a real 3-node cluster (real processes, real peer
 * channel): cost and peek through forwarding, reset from any node, and hundreds of
 * concurrent all-or-nothing batches spanning every owner, where exactly the right number
 * pass and a refused batch leaves no count behind.
 */
import t from "tap";
import { closeAgents, limit, post, type Reply } from "../../harness/http-client.js";
import { startCluster, type TestCluster } from "../../harness/cluster.js";

t.teardown(closeAgents);

// Deadlines wide enough for a loaded 2-core machine: this file checks exactness, not failure handling.
let cluster: TestCluster;
t.before(async () => {
  cluster = await startCluster(3, { PEER_TIMEOUT_MS: "3000" });
});
t.teardown(() => cluster.stop());

const node = (i: number) => cluster.nodes[i]!;
// Below the limits members share (docs/api.md, Shares), so counts read as requests counted.
const item = (identifier: string, extra: Record<string, unknown> = {}) => ({ namespace: "test", identifier, limit: 1_000, duration: 3600, ...extra });

t.test("cost and peek through forwarding", async (t) => {
  const id = cluster.identifierOwnedBy(1, "cost");
  const a = await limit(node(0).url, item(id, { limit: 10, cost: 3 }));
  t.equal(a.status, 200);
  t.equal(a.json.data.count, 3, "forwarded with its cost");
  for (let i = 0; i < 3; i++) {
    const peek = await limit(node(2).url, item(id, { limit: 10, cost: 0 }));
    t.equal(peek.json.data.count, 3, "a forwarded peek counts nothing");
    t.equal(peek.json.data.remaining, 7);
  }
  const big = await limit(node(2).url, item(id, { limit: 10, cost: 8 }));
  t.equal(big.status, 429, "3 + 8 > 10");
  const small = await limit(node(2).url, item(id, { limit: 10, cost: 7 }));
  t.equal(small.status, 200, "a blocked heavier request does not block a lighter one that fits");
  t.equal(small.json.data.remaining, 0);
  const blockedPeek = await limit(node(0).url, item(id, { limit: 10, cost: 0 }));
  t.equal(blockedPeek.status, 429, "a peek at a full limit, forwarded");
  const over = await limit(node(0).url, item(id, { limit: 10, cost: 11 }));
  t.equal(over.status, 400);
});

t.test("reset from any node removes the states on their owner", async (t) => {
  const id = cluster.identifierOwnedBy(2, "reset");
  for (const duration of [60, 3600]) t.equal((await limit(node(0).url, item(id, { limit: 1, duration }))).status, 200);
  t.equal((await limit(node(1).url, item(id, { limit: 1, duration: 60 }))).status, 429);
  const r = await post(node(1).url, "/limit/reset", { namespace: "test", identifier: id });
  t.equal(r.status, 200);
  t.same(
    r.json.data.removed.map((x: { duration: number }) => x.duration).sort((a: number, b: number) => a - b),
    [60, 3600],
  );
  t.equal((await limit(node(0).url, item(id, { limit: 1, duration: 60 }))).status, 200, "counted afresh");
  const local = await post(node(2).url, "/limit/reset", { namespace: "test", identifier: id, duration: 60, algorithm: "fixed-window" });
  t.same(local.json.data.removed, [{ algorithm: "fixed-window", duration: 60 }], "and on the owner itself");
});

t.test("a batch on one remote owner is decided there in one step", async (t) => {
  const id = cluster.identifierOwnedBy(2, "one");
  const r = await post(node(0).url, "/limit/batch", { requests: [item(id, { limit: 5, cost: 2 }), item(id, { limit: 5, cost: 3 })] });
  t.equal(r.status, 200);
  t.same(
    r.json.data.results.map((x: { remaining: number }) => x.remaining),
    [3, 0],
  );
  const no = await post(node(1).url, "/limit/batch", { requests: [item(id, { limit: 5, duration: 60 }), item(id, { limit: 5, cost: 1 })] });
  t.equal(no.status, 429);
  t.equal((await limit(node(1).url, item(id, { limit: 6, duration: 60, cost: 0 }))).json.data.count, 0, "nothing of the refused batch counted");
});

t.test("hundreds of concurrent batches across 3 owners: exactly the limit passes, no count leaks", async (t) => {
  const SCARCE = 25;
  const PER_GROUP = 100;
  // Three groups; in each, one scarce identifier on one owner and a plentiful one (cost 2)
  // on each of the three owners. Every batch spans all three owners.
  const groups = [0, 1, 2].map((g) => ({
    scarce: cluster.identifierOwnedBy(g, `scarce${g}`),
    plenty: [0, 1, 2].map((o) => cluster.identifierOwnedBy(o, `plenty${g}-`)),
  }));
  const sends: Promise<{ g: number; r: Reply }>[] = [];
  for (let k = 0; k < PER_GROUP; k++) {
    groups.forEach((grp, g) => {
      const requests = [item(grp.scarce, { limit: SCARCE }), ...grp.plenty.map((id) => item(id, { cost: 2 }))];
      if (k % 2 === 1) requests.reverse();
      sends.push(post(node((k + g) % 3).url, "/limit/batch", { requests }).then((r) => ({ g, r })));
    });
  }
  const replies = await Promise.all(sends);
  t.same(
    replies.filter(({ r }) => r.status !== 200 && r.status !== 429).map(({ r }) => r.text.slice(0, 200)),
    [],
    "only 200 and 429",
  );
  t.equal(replies.filter(({ r }) => r.json?.data?.degraded === true).length, 0, "no batch failed open");
  for (const [g, grp] of groups.entries()) {
    const passed = replies.filter((x) => x.g === g && x.r.status === 200).length;
    t.equal(passed, SCARCE, `group ${g}: exactly ${SCARCE} of ${PER_GROUP} batches pass`);
    for (const [o, id] of grp.plenty.entries()) {
      const peek = await limit(node((o + 1) % 3).url, item(id, { cost: 0 }));
      t.equal(peek.json.data.count, 2 * SCARCE, `group ${g}, owner ${o}: counted only by the batches that passed`);
    }
    const scarce = await limit(node(g).url, item(grp.scarce, { limit: SCARCE + 1, cost: 0 }));
    t.equal(scarce.json.data.count, SCARCE);
  }
  const refused = replies.find(({ r }) => r.status === 429)!.r;
  t.equal(refused.json.data.results.length, 4);
  t.ok(refused.json.data.retry_after > 0);
  for (const x of refused.json.data.results)
    t.equal(x.allowed ? x.retry_after : x.retry_after > 0, x.allowed ? undefined : true, "blocked items carry their wait");
  t.equal(refused.headers["retry-after"], String(Math.max(1, Math.ceil(refused.json.data.retry_after))));
});

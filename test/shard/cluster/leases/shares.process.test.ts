// Shares (docs/api.md, Shares): a non-owner answers a fixed-window key of a large limit from its
// share of the window, in the turn the request arrived, so a pipelining client's connection
// survives; the owner holds the shares back from the window's start, so three nodes hit at once
// admit exactly the limit, and a node that dies with a share left under-admits by what it left.
import t from "tap";
import { SHARE_DIVISOR } from "../../../../src/shard/local/share-rule.js";
import { hit, metric, startCluster } from "../../../harness/cluster.js";
import { closeAgents } from "../../../harness/http-client.js";
import { limitRequest, rawExchange } from "../../../harness/raw-http.js";
import { eventually, sleep } from "../../../harness/wait.js";

t.teardown(closeAgents);

const cluster = await startCluster(3);
t.teardown(() => cluster.stop());
// Every connection is up now; a share is taken for windows that begin a second after that.
const upAt = Date.now();
const [n0, n1, n2] = cluster.nodes as [NonNullable<(typeof cluster.nodes)[0]>, NonNullable<(typeof cluster.nodes)[0]>, NonNullable<(typeof cluster.nodes)[0]>];
const run = Date.now().toString(36);

/** Sleep until a window of `durationS` begins at least `afterMs` after the ring was up. */
async function windowAfterUp(durationS: number, afterMs = 1200): Promise<number> {
  const D = durationS * 1000;
  const start = Math.ceil((upAt + afterMs) / D) * D;
  const next = Math.max(start, Math.ceil(Date.now() / D) * D);
  await sleep(next - Date.now() + 30);
  return next;
}

const shared = async (node: typeof n0) => (await metric(node, "ringlimit_forwarded_total", '{outcome="shared"}')) ?? 0;

/** `n` identifiers, `prefix`-named, owned by node `owner` */
function ownedBy(owner: number, prefix: string, n: number): string[] {
  const ids: string[] = [];
  for (let i = 0; ids.length < n; i++) if (cluster.ownerOf("test", `${prefix}-${run}-${i}`) === owner) ids.push(`${prefix}-${run}-${i}`);
  return ids;
}

t.test("a non-owner answers a pipelined burst of keys it never saw, in order, and the connection stays open", async (t) => {
  await windowAfterUp(1);
  // 60 requests in one write to node 0: 20 keys of each owner, interleaved.
  const perOwner = [0, 1, 2].map((o) => ownedBy(o, "pipe", 20));
  const burst = perOwner[0]!.flatMap((_, i) => [perOwner[0]![i]!, perOwner[1]![i]!, perOwner[2]![i]!]);
  const before = await shared(n0);
  const body = burst.map((id) => limitRequest({ namespace: "test", identifier: id, limit: 1_000_000, duration: 1 })).join("");
  const r = await rawExchange(cluster.nodes[0]!.port, body, { responses: burst.length, waitMs: 10_000 });
  t.notOk(r.closedByServer, "the connection stays open");
  t.equal(r.responses.length, burst.length, "every request answered");
  t.same(
    r.responses.map((x) => JSON.parse(x.body).data.identifier),
    burst,
    "answers in the order of the requests",
  );
  t.ok(r.responses.every((x) => x.status === 200 && JSON.parse(x.body).data.degraded === undefined), "all allowed, none degraded");
  t.equal((await shared(n0)) - before, 40, "the 40 keys other nodes own were answered from node 0's shares");
});

t.test("limit 3 is too small to share: a pipelined burst on a non-owner is cut off, and nothing it did not see is counted", async (t) => {
  const [id] = ownedBy(1, "small", 1);
  const request = limitRequest({ namespace: "test", identifier: id, limit: 3, duration: 60 });
  // Two in one write: the first goes to node 1, and uWebSockets.js closes the connection when it
  // reads the second while the first's answer is pending (docs/api.md, Pipelining).
  const cut = await rawExchange(cluster.nodes[0]!.port, request + request, { waitMs: 10_000 });
  t.ok(cut.closedByServer, "the connection was closed");
  t.equal(cut.responses.length, 0, "no answer reached the client");
  const countAtOwner = async () => (await hit(n1, id!, 3, { duration: 60, cost: 0 })).json.data.count as number;
  t.ok(await eventually(async () => (await countAtOwner()) === 0, 10_000), "the owner counts nothing for it (given back)");
  // One at a time, the same key is answered through node 0 exactly as by its owner.
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await hit(n0, id!, 3, { duration: 60 })).status);
  t.same(statuses, [200, 200, 200, 429], "three allowed, the fourth refused");
});

const L = 2048;
const SHARE = L / SHARE_DIVISOR;

t.test("shares never over-admit: three nodes hit one key at once, exactly the limit is allowed", async (t) => {
  const D = 30;
  const window = await windowAfterUp(D);
  const [hot] = ownedBy(1, "hot", 1);
  // The second key, for the next test, takes node 0's share in the same window.
  const [dying] = ownedBy(1, "dying", 1);
  const used = 5;
  for (let i = 0; i < used; i++) t.equal((await hit(n0, dying!, L, { duration: D })).status, 200);
  const before = await Promise.all([n0, n2].map(shared));
  const perNode = 1200;
  const results = await Promise.all(
    [n0, n1, n2].map(async (node) => {
      let allowed = 0;
      let degraded = 0;
      const windows = new Set<number>();
      for (let b = 0; b < perNode; b += 50) {
        const rs = await Promise.all(Array.from({ length: 50 }, () => hit(node, hot!, L, { duration: D })));
        for (const r of rs) {
          if (r.json.data.degraded !== undefined) degraded++;
          if (r.status === 200) allowed++;
          windows.add(r.json.data.reset_time);
        }
      }
      return { allowed, degraded, windows };
    }),
  );
  t.same(results.map((r) => r.degraded), [0, 0, 0], "no answer degraded");
  const windows = new Set(results.flatMap((r) => [...r.windows]));
  t.same([...windows], [window / 1000 + D], "all in one window");
  const allowed = results.reduce((s, r) => s + r.allowed, 0);
  t.equal(allowed, L, `exactly ${L} allowed of ${3 * perNode} (by node: ${results.map((r) => r.allowed).join(", ")})`);
  const after = await Promise.all([n0, n2].map(shared));
  t.same([after[0]! - before[0]!, after[1]! - before[1]!], [SHARE, SHARE], "each non-owner answered its whole share itself");

  t.test("a node that dies with a share left under-admits by what it left, never more", async (t) => {
    await cluster.nodes[0]!.kill();
    let allowed = used;
    for (let b = 0; b < L + 100; b += 50) {
      const rs = await Promise.all(Array.from({ length: 50 }, () => hit(n2, dying!, L, { duration: D })));
      for (const r of rs) if (r.status === 200 && r.json.data.degraded === undefined) allowed++;
    }
    t.equal(allowed, L - (SHARE - used), `${allowed} allowed: the limit less the ${SHARE - used} node 0 left of its share`);
  });
});

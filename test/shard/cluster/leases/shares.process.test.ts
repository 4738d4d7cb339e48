// Shares (docs/api.md, Shares): a non-owner answers a fixed-window key of a large limit from its
// share of the window, in the turn the request arrived, so a pipelining client's connection
// survives; the owner holds the shares back from the window's start, so three nodes hit at once
// admit exactly the limit, and a node that dies with a share left under-admits by what it left.
import t, { type Test } from "tap";
import { SHARE_DIVISOR } from "../../../../src/shard/local/share-rule.js";
import { hit, metric, startCluster } from "../../../harness/cluster.js";
import { closeAgents, post } from "../../../harness/http-client.js";
import { limitRequest, rawBursts, rawExchange } from "../../../harness/raw-http.js";
import { pipeliningSkip } from "../../../harness/run-workers.js";
import { eventually, sleep } from "../../../harness/wait.js";

t.teardown(closeAgents);

const cluster = await startCluster(3);
t.teardown(() => cluster.stop());
// Every connection is up now; each node asks the others HOLD within a second (the shares' sweep),
// and a share by rule is taken for windows that begin a second after the yes.
const upAt = Date.now();
const [n0, n1, n2] = cluster.nodes as [NonNullable<(typeof cluster.nodes)[0]>, NonNullable<(typeof cluster.nodes)[0]>, NonNullable<(typeof cluster.nodes)[0]>];
const run = Date.now().toString(36);

/** Sleep until a window of `durationS` begins at least `afterMs` after the ring was up. */
async function windowAfterUp(durationS: number, afterMs = 3500): Promise<number> {
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

// With WORKERS > 1 no answer is given in uWS's handler, shares' included (every decision is the
// state owner's, a thread away), so a pipelined burst is closed at its second request
// (docs/security.md, item 4): the pipelined cases below hold for a single-thread door only.
const pipelinedSkip = pipeliningSkip();

t.test("a non-owner answers a pipelined burst of keys it never saw, in order, and the connection stays open", { skip: pipelinedSkip }, async (t) => {
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
  t.ok(
    r.responses.every((x) => x.status === 200 && JSON.parse(x.body).data.degraded === undefined),
    "all allowed, none degraded",
  );
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

t.test(
  "a window that began before the node connected: a key's first request goes to its owner and brings back a grant, which answers the ones after it, pipelined too",
  { skip: pipelinedSkip },
  async (t) => {
    const [id] = ownedBy(1, "early", 1);
    const YEAR = 31_536_000; // a window that began long before these nodes started
    const share = Math.floor(1_000_000 / SHARE_DIVISOR);
    const forwarded = async () => (await metric(n0, "ringlimit_forwarded_total", '{outcome="allowed"}')) ?? 0;
    const granted = async () => (await metric(n0, "ringlimit_share_granted_total")) ?? 0;
    const returned = async () => (await metric(n0, "ringlimit_share_returned_total")) ?? 0;
    const countAtOwner = async () => (await hit(n1, id!, 1_000_000, { duration: YEAR, cost: 0 })).json.data.count as number;
    const [f0, g0, r0] = [await forwarded(), await granted(), await returned()];
    t.equal((await hit(n0, id!, 1_000_000, { duration: YEAR })).status, 200);
    t.equal((await forwarded()) - f0, 1, "the first request went to the owner");
    // Its answer carried a grant of one share (DecideItemFlag.OPENING): no LEASE. Before it, a key
    // seen once got none, and every request of it went to the owner until two came within 100 ms.
    t.equal((await granted()) - g0, share, `the answer brought node 0 a grant of one share (${share})`);
    // A window longer than SHARE_MAX_WINDOW_S has no share by rule: the owner holds none back.
    t.equal(await countAtOwner(), 1 + share, "the owner counts the request and the grant");
    const s1 = await shared(n0);
    t.equal((await hit(n0, id!, 1_000_000, { duration: YEAR })).status, 200);
    t.equal((await shared(n0)) - s1, 1, "the second request was answered from the grant");
    const request = limitRequest({ namespace: "test", identifier: id, limit: 1_000_000, duration: YEAR });
    const r = await rawExchange(cluster.nodes[0]!.port, request.repeat(50), { responses: 50, waitMs: 10_000 });
    t.notOk(r.closedByServer, "the connection stays open");
    t.equal(r.responses.length, 50, "50 pipelined requests answered");
    t.equal((await shared(n0)) - s1, 51, "from the grant");
    t.equal((await forwarded()) - f0, 1, "none of them forwarded");
    // It stands in for the share by rule node 0 could not take: kept for the window, not returned when idle.
    await sleep(2500);
    t.equal((await returned()) - r0, 0, "nothing given back after 2.5 s idle");
    t.equal(await countAtOwner(), 1 + share, "the owner still counts it");
  },
);

const L = 2048;
const SHARE = L / SHARE_DIVISOR;
/** the owner's limit for its own requests: L less the two other members' shares */
const OWNER_LIMIT = L - 2 * SHARE;

/** `n` requests for `id` through `node`, 50 at a time: how many were allowed (not degraded), and the windows answered. */
async function hits(node: typeof n0, id: string, n: number, duration: number) {
  let allowed = 0;
  let degraded = 0;
  const windows = new Set<number>();
  for (let b = 0; b < n; b += 50) {
    const rs = await Promise.all(Array.from({ length: Math.min(50, n - b) }, () => hit(node, id, L, { duration })));
    for (const r of rs) {
      if (r.json.data.degraded !== undefined) degraded++;
      else if (r.status === 200) allowed++;
      windows.add(r.json.data.reset_time);
    }
  }
  return { allowed, degraded, windows };
}

/**
 * What is still allowed of `id` once a burst is over: each node in turn is asked until it
 * refuses, then the grants nobody drew on go back to the owner (a second without requests),
 * and again, until two rounds in a row allow nothing. A grant that arrived after a node's last
 * request of the burst is used or returned here, so a count can be exact.
 */
async function drain(nodes: (typeof n0)[], id: string, duration: number) {
  let allowed = 0;
  const windows = new Set<number>();
  for (let quiet = 0; quiet < 2;) {
    let round = 0;
    for (const node of nodes) {
      for (;;) {
        const r = await hits(node, id, 20, duration);
        round += r.allowed;
        r.windows.forEach((w) => windows.add(w));
        if (r.allowed === 0) break;
      }
    }
    allowed += round;
    quiet = round === 0 ? quiet + 1 : 0;
    await sleep(1500);
  }
  return { allowed, windows };
}

/**
 * `perNode` requests for `id` through each of the three nodes at once (none may be degraded),
 * then the drain: how many each allowed, what the drain allowed, the total and the windows.
 */
async function allAtOnce(t: Test, id: string, perNode: number, duration: number) {
  const results = await Promise.all([n0, n1, n2].map((node) => hits(node, id, perNode, duration)));
  t.same(
    results.map((r) => r.degraded),
    [0, 0, 0],
    "no answer degraded",
  );
  const rest = await drain([n0, n1, n2], id, duration);
  const allowed = results.reduce((s, r) => s + r.allowed, 0) + rest.allowed;
  const windows = new Set([...results.flatMap((r) => [...r.windows]), ...rest.windows]);
  return { byNode: `${results.map((r) => r.allowed).join(", ")} of ${perNode} each, then ${rest.allowed}`, allowed, windows };
}

t.test("in a window longer than shares by rule are taken for, three nodes hit one key at once: exactly the limit", async (t) => {
  const YEAR = 31_536_000;
  const [key] = ownedBy(1, "opening", 1);
  const perNode = 1200;
  const granted = await Promise.all([n0, n2].map(async (n) => (await metric(n, "ringlimit_share_granted_total")) ?? 0));
  const before = await Promise.all([n0, n2].map(shared));
  const { allowed, byNode } = await allAtOnce(t, key!, perNode, YEAR);
  // No share by rule in a year-long window (SHARE_MAX_WINDOW_S), so none is held back: what the
  // other two answer comes out of the owner's count as grants.
  t.equal(allowed, L, `exactly ${L} allowed (by node: ${byNode})`);
  const after = await Promise.all([n0, n2].map(shared));
  const grantedAfter = await Promise.all([n0, n2].map(async (n) => (await metric(n, "ringlimit_share_granted_total")) ?? 0));
  t.ok(
    grantedAfter.every((g, i) => g - granted[i]! >= SHARE) && after.every((a, i) => a - before[i]! >= SHARE),
    `each non-owner was granted and answered at least a share itself (granted ${grantedAfter.map((g, i) => g - granted[i]!).join(", ")}, answered ${after.map((a, i) => a - before[i]!).join(", ")})`,
  );
});

t.test("in one window that began after the cluster was up", async (t) => {
  // One window for the four tests below: long enough for all of them on a loaded machine.
  const D = 60;
  const window = await windowAfterUp(D);
  const windowEnd = window / 1000 + D;
  const [dying] = ownedBy(1, "dying", 1);
  const used = 5;
  // Node 0 takes its share of `dying` now, for the last test; 5 of 16 leaves more than half: no LEASE.
  for (let i = 0; i < used; i++) t.equal((await hit(n0, dying!, L, { duration: D })).status, 200);

  t.test("a hot key: the share runs low, the owner grants more, and a pipelining client is answered on", { skip: pipelinedSkip }, async (t) => {
    const [hot] = ownedBy(1, "pipehot", 1);
    const request = limitRequest({ namespace: "test", identifier: hot, limit: 1_000_000, duration: D });
    const share = 1_000_000 / SHARE_DIVISOR;
    const bursts = 12;
    const n = 1000;
    const before = await shared(n0);
    // 12,000 requests on one connection, 1,000 per write, each write once the last one's answers
    // are in: one share (7,812) does not cover them; LEASE grants do, asked before it runs out.
    const r = await rawBursts(
      cluster.nodes[0]!.port,
      Array.from({ length: bursts }, () => request.repeat(n)),
      n,
      { waitMs: 60_000 },
    );
    t.notOk(r.closedByServer, "the connection stays open");
    t.equal(r.responses.length, bursts * n, "every request answered");
    t.ok(
      r.responses.every((x) => x.status === 200),
      "all allowed",
    );
    t.equal((await shared(n0)) - before, bursts * n, `all ${bursts * n} answered from node 0's share and its grants (one share: ${Math.floor(share)})`);
  });

  t.test("shares never over-admit: three nodes hit one key at once, exactly the limit is allowed", async (t) => {
    const [hot] = ownedBy(1, "hot", 1);
    const before = await Promise.all([n0, n2].map(shared));
    const perNode = 1200;
    const { allowed, byNode, windows } = await allAtOnce(t, hot!, perNode, D);
    t.same([...windows], [windowEnd], "all in one window");
    t.equal(allowed, L, `exactly ${L} allowed (by node: ${byNode})`);
    const after = await Promise.all([n0, n2].map(shared));
    const fromShares = [after[0]! - before[0]!, after[1]! - before[1]!];
    t.ok(
      fromShares.every((n) => n >= SHARE),
      `each non-owner answered at least its share itself (${fromShares.join(", ")}, with grants)`,
    );
  });

  t.test("a grant nobody draws on goes back to the owner", async (t) => {
    const [idle] = ownedBy(1, "idle", 1);
    // 10 of 16 leaves less than half: node 0 asks for a grant (16) and then goes quiet.
    for (let i = 0; i < 10; i++) t.equal((await hit(n0, idle!, L, { duration: D })).status, 200);
    const returned = async () => (await metric(n0, "ringlimit_share_returned_total")) ?? 0;
    t.ok(await eventually(async () => (await returned()) >= 16, 10_000), "node 0 returned the grant");
    // The GIVE_BACK crosses the peer channel: the owner's count is back to the two shares it holds back.
    const countAtOwner = async () => (await hit(n1, idle!, L, { duration: D, cost: 0 })).json.data.count as number;
    t.ok(await eventually(async () => (await countAtOwner()) === 2 * SHARE, 10_000), "the owner counts none of the grant");
    const atOwner = await hits(n1, idle!, OWNER_LIMIT + 50, D);
    t.equal(atOwner.allowed, OWNER_LIMIT, `the owner admits its whole ${OWNER_LIMIT} again (without the return: ${OWNER_LIMIT - 16})`);
    t.same([...atOwner.windows], [windowEnd]);
  });

  t.test("a reset drops the grants the owner counted before it: never more than the limit after it", async (t) => {
    const [reset] = ownedBy(1, "reset", 1);
    const granted = async () => (await metric(n0, "ringlimit_share_granted_total")) ?? 0;
    const before = await granted();
    // 10 of 16: node 0 asks for a grant of 16, then the identifier is reset on its owner.
    for (let i = 0; i < 10; i++) t.equal((await hit(n0, reset!, L, { duration: D })).status, 200);
    t.ok(await eventually(async () => (await granted()) === before + 16, 10_000), "node 0 holds a grant of 16");
    t.equal((await post(n2.url, "/limit/reset", { namespace: "test", identifier: reset })).status, 200);
    // After the reset: node 0's 6 left of its share, the owner's 2,016, node 2's share of 16.
    const results = await Promise.all([n0, n1, n2].map((node) => hits(node, reset!, 800, D)));
    const rest = await drain([n0, n1, n2], reset!, D);
    const allowed = results.reduce((s, r) => s + r.allowed, 0) + rest.allowed;
    t.same([...new Set([...results.flatMap((r) => [...r.windows]), ...rest.windows])], [windowEnd]);
    t.equal(
      allowed,
      L - 10,
      `${allowed} allowed after the reset (by node: ${results.map((r) => r.allowed).join(", ")}, then ${rest.allowed}): the limit less the 10 node 0 used before it`,
    );
  });

  t.test("a node that dies with a share left under-admits by what it left, never more", async (t) => {
    await cluster.nodes[0]!.kill();
    const survivors = await hits(n2, dying!, L + 100, D);
    const rest = await drain([n1, n2], dying!, D);
    const allowed = used + survivors.allowed + rest.allowed;
    t.same([...new Set([...survivors.windows, ...rest.windows])], [windowEnd]);
    t.equal(allowed, L - (SHARE - used), `${allowed} allowed: the limit less the ${SHARE - used} node 0 left of its share`);
  });
});

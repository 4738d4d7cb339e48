// Issue 39's exactness check, as a test of real nodes: 20 clients, each on its own keep-alive
// connection, spread round-robin over a three-node cluster with the defaults' REPLICAS=2, all
// on one key of limit 1,000. Whatever the peer path coalesces (frames, replies, replica
// updates), exactly the limit is allowed. `node bench/exact-one-key.mjs` runs the same check
// at load and prints the count.
import http from "node:http";
import t from "tap";
import { closeAgents, request, TEST_KEY, type Reply } from "../../harness/http-client.js";
import { metric, startCluster } from "../../harness/cluster.js";

t.teardown(closeAgents);

const CLIENTS = 20;
const LIMIT = 1000;
const PER_CLIENT = 75; // 1,500 in all: every client sends past the point where the key is spent
// A year-long window: no window ends during the test, and no share by rule is taken for one
// (SHARE_MAX_WINDOW_S), so the key's owner decides every request that is not its own node's.
const YEAR = 31_536_000;

t.test("20 clients over 3 nodes on one key of limit 1,000: exactly 1,000 allowed", async (t) => {
  const cluster = await startCluster(3, { REPLICAS: "2" });
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes.map((n) => n!);
  const id = "exact-one-key";
  const body = JSON.stringify({ namespace: "test", identifier: id, limit: LIMIT, duration: YEAR });
  const agents = Array.from({ length: CLIENTS }, () => new http.Agent({ keepAlive: true, maxSockets: 1 }));
  t.teardown(() => agents.forEach((a) => a.destroy()));

  // Each client sends its requests one after another on its own connection, as a product's
  // worker would; the 20 run at once, client c on node c % 3.
  const replies: Reply[][] = await Promise.all(
    agents.map(async (agent, c) => {
      const mine: Reply[] = [];
      for (let i = 0; i < PER_CLIENT; i++)
        mine.push(
          await request(nodes[c % 3]!.url + "/limit", {
            method: "POST",
            agent,
            headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json" },
            body,
          }),
        );
      return mine;
    }),
  );
  const all = replies.flat();
  t.equal(all.length, CLIENTS * PER_CLIENT, "every request answered");
  t.same(
    all.filter((r) => r.status !== 200 && r.status !== 429).map((r) => r.status),
    [],
    "every answer is 200 or 429",
  );
  t.equal(all.filter((r) => r.json?.data?.degraded).length, 0, "no answer degraded (failed open and not counted)");
  // The invariant: allowed + blocked = sent, and allowed = the limit, not one more or less.
  t.equal(all.filter((r) => r.status === 200).length, LIMIT, `exactly ${LIMIT} allowed`);
  t.equal(all.filter((r) => r.status === 429).length, CLIENTS * PER_CLIENT - LIMIT, "the rest blocked");
  const counts = all
    .filter((r) => r.status === 200)
    .map((r) => r.json.data.count as number)
    .sort((a, b) => a - b);
  t.same(
    counts,
    Array.from({ length: LIMIT }, (_, i) => i + 1),
    "the allowed answers carry the counts 1..1,000, each once",
  );
  const forwarded = await Promise.all(nodes.map(async (n) => (await metric(n, "ringlimit_forwarded_total", '{outcome="allowed"}')) ?? 0));
  t.ok(forwarded.filter((f) => f > 0).length === 2, `the two non-owners forwarded their allowed decisions to the owner (${forwarded.join(", ")})`);
});

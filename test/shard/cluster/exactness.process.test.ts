/**
 * Exactness over the forward path (issue 39): 20 clients on one key of limit 1,000, spread
 * round-robin over a real 3-node cluster (REPLICAS=2 by default), so two thirds of the
 * requests are forwarded to the owner, many per frame. Whatever travels together, the owner
 * counts each request once: exactly 1,000 are admitted, none degraded.
 */
import t from "tap";
import { closeAgents } from "../../harness/http-client.js";
import { hit, startCluster } from "../../harness/cluster.js";

t.teardown(closeAgents);

const CLIENTS = 20;
const PER_CLIENT = 65;
const LIMIT = 1_000;

t.test("20 clients, one key of limit 1,000, 3 nodes round-robin: exactly 1,000 allowed", async (t) => {
  const cluster = await startCluster(3);
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes.map((n) => n!);
  const key = "exact-one-key";
  let allowed = 0;
  let blocked = 0;
  let degraded = 0;
  let other = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      // Each client goes round the nodes from its own start, one request at a time.
      for (let i = 0; i < PER_CLIENT; i++) {
        const r = await hit(nodes[(c + i) % nodes.length]!, key, LIMIT);
        // Counting invariant: every answer is exactly one of allowed, blocked, degraded, other.
        if (r.json?.data?.degraded === true) degraded++;
        else if (r.status === 200 && r.json.data.allowed === true) allowed++;
        else if (r.status === 429) blocked++;
        else other++;
      }
    }),
  );
  t.equal(degraded, 0, "no answer degraded (every owner answered in time)");
  t.equal(other, 0, "no other status");
  t.equal(allowed, LIMIT, "exactly the limit admitted");
  t.equal(blocked, CLIENTS * PER_CLIENT - LIMIT, "the rest blocked");
});

/**
 * A reset is visible on every node within a round trip (issue 22 item 4): nodes that cached
 * the owner's 429 for an identifier (BlockedCache) drop it when the owner resets the
 * identifier, whichever node took the reset. Before, they answered 429 until the window's end
 * while the owner answered 200.
 */
import t from "tap";
import { closeAgents, post } from "../../../harness/http-client.js";
import { hit, metric, startCluster } from "../../../harness/cluster.js";
import type { NodeProcess } from "../../../harness/node-process.js";

t.teardown(closeAgents);

const LIMIT = 3;

t.test("after a reset through any node, no node answers from a cached block of the identifier", async (t) => {
  const cluster = await startCluster(3);
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes as NodeProcess[];
  for (const via of [1, 0, 2]) {
    // The identifier is owned by node 0; nodes 1 and 2 forward to it and cache its 429s.
    const id = cluster.identifierOwnedBy(0, `blocked-via-${via}`);
    for (let i = 0; i < LIMIT; i++) t.equal((await hit(nodes[1]!, id, LIMIT)).status, 200, "within the limit");
    for (const n of [1, 2]) t.equal((await hit(nodes[n]!, id, LIMIT)).status, 429, `node ${n}: blocked by the owner`);
    const cached = (await metric(nodes[1]!, "ringlimit_forwarded_total", '{outcome="cached_block"}')) ?? 0;
    t.equal((await hit(nodes[1]!, id, LIMIT)).status, 429, "node 1: still blocked");
    t.equal((await metric(nodes[1]!, "ringlimit_forwarded_total", '{outcome="cached_block"}')) ?? 0, cached + 1, "node 1 answered from its cached block");

    const r = await post(nodes[via]!.url, "/limit/reset", { namespace: "test", identifier: id });
    t.equal(r.status, 200, `reset through node ${via}`);
    for (const n of [1, 2, 0]) {
      const after = await hit(nodes[n]!, id, LIMIT);
      t.equal(after.status, 200, `node ${n}: allowed right after the reset answered`);
      t.notOk(after.json.data.degraded, "not degraded");
    }
    t.equal((await hit(nodes[2]!, id, LIMIT)).status, 429, "and the new count holds: the 4th is refused");
  }
});

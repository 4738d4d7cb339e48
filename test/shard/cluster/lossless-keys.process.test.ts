/**
 * One identifier has one counter wherever it is asked, for text of every plane; a lone
 * surrogate is refused by every node before it could reach the peer channel.
 *
 * Before (commit 81f8649): "\ud800" was counted locally by its owner and as "\ufffd" when
 * forwarded: 10 allowed of a limit of 5 over a 3-node cluster.
 */
import t from "tap";
import { closeAgents } from "../../harness/http-client.js";
import { hit, startCluster } from "../../harness/cluster.js";

t.teardown(closeAgents);

t.test("3 nodes: one counter per identifier, lone surrogates refused everywhere", async (t) => {
  const cluster = await startCluster(3);
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes.map((n) => n!);

  for (const text of ["é", "中文", "😀", "\u{10ffff}x", "\ufffd"]) {
    for (const owner of [0, 1, 2]) {
      const id = text + "-" + cluster.identifierOwnedBy(owner, "lossless");
      const counts: number[] = [];
      for (let i = 0; i < 6; i++) counts.push((await hit(nodes[i % 3]!, id, 100)).json?.data?.count);
      t.same(counts, [1, 2, 3, 4, 5, 6], `${JSON.stringify(text)} owned by node ${owner}: one counter`);
    }
  }

  // Asked at every node, a lone surrogate never gets more than its limit (it gets nothing).
  const replies = await Promise.all(Array.from({ length: 15 }, (_, i) => hit(nodes[i % 3]!, "\ud800-" + cluster.identifierOwnedBy(1, "lone"), 5)));
  t.equal(replies.filter((r) => r.status === 200).length, 0, "none of 15 allowed with a limit of 5");

  for (const lone of ["\ud800", "\udfff"]) {
    for (const [i, node] of nodes.entries()) {
      const r = await hit(node, lone, 5);
      t.equal(r.status, 400, `node ${i} refuses ${JSON.stringify(lone)}`);
      t.equal(r.json?.data?.details?.[0]?.field, "identifier");
    }
  }
  // The identifier a lone surrogate used to be confused with keeps its own count.
  const r = await hit(nodes[0]!, "\ufffd", 5);
  t.equal(r.status, 200);
});

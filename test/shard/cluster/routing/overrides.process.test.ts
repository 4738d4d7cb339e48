/**
 * Overrides on a 3-node cluster of real processes (docs/policy.md, Overrides): a key is
 * decided on its owner with the owner's policy, and the answer, forwarded back over the
 * peer channel, is the applied limit's wherever the request came in: limit, algorithm,
 * window, headers, a deny list, shadow (marked and counted where it was answered), and
 * batches across owners, each item with its own override.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { closeAgents, post } from "../../../harness/http-client.js";
import { hit, metric, startCluster } from "../../../harness/cluster.js";

t.teardown(closeAgents);

const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-cluster-overrides-"));
writeFileSync(
  path.join(dir, "overrides.yaml"),
  `overrides:
  - {namespace: test, identifier: "big-*", limit: 50}
  - {namespace: test, identifier: "deny-*", limit: 0}
  - {namespace: test, identifier: "trial-*", limit: 1, shadow: true}
  - {namespace: test, identifier: "hour-*", limit: 2, duration: 7200, algorithm: token-bucket}
`,
);

t.test("3 nodes: the owner applies its policy, the answer carries the applied limit back", async (t) => {
  const cluster = await startCluster(3, { POLICY_PATH: dir });
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes.map((n) => n!);

  await t.test("a raised limit, counted on the owner whichever node is asked", async (t) => {
    for (const owner of [1, 2]) {
      const id = cluster.identifierOwnedBy(owner, "big");
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await hit(nodes[i]!, id, 5));
      t.same(
        answers.map((r) => [r.status, r.json.data.limit, r.json.data.remaining]),
        [
          [200, 50, 49],
          [200, 50, 48],
          [200, 50, 47],
        ],
        `owned by node ${owner}`,
      );
      t.equal(answers[0]!.headers["ratelimit-policy"], '"fixed-window";q=50;w=3600', "the forwarded answer's headers are the applied limit's");
    }
  });

  await t.test("another window and algorithm travel back too", async (t) => {
    const id = cluster.identifierOwnedBy(1, "hour");
    const r = await hit(nodes[0]!, id, 5);
    t.equal(r.json.data.algorithm, "token-bucket");
    t.equal(r.json.data.limit, 2);
    t.equal(r.headers["ratelimit-policy"], '"token-bucket";q=2;w=7200');
  });

  await t.test("a deny list answered by a non-owner: 429, limit 0, the window's wait", async (t) => {
    const id = cluster.identifierOwnedBy(2, "deny");
    for (let i = 0; i < 2; i++) {
      const r = await hit(nodes[0]!, id, 5);
      t.equal(r.status, 429);
      t.equal(r.json.data.limit, 0);
      t.equal(r.json.data.retry_after, 3600);
    }
  });

  await t.test("shadow across the peer channel: let through, marked, counted on the node that answered", async (t) => {
    const id = cluster.identifierOwnedBy(1, "trial");
    const before = (await metric(nodes[0]!, "ringlimit_shadow_allowed_total", '{namespace="test"}')) ?? 0;
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await hit(nodes[0]!, id, 5));
    t.same(
      answers.map((r) => [r.status, r.json.data.allowed, r.json.data.shadow ?? false, r.json.data.limit]),
      [
        [200, true, false, 1],
        [200, true, true, 1],
        [200, true, true, 1],
      ],
    );
    t.equal(await metric(nodes[0]!, "ringlimit_shadow_allowed_total", '{namespace="test"}'), before + 2);
    t.equal(await metric(nodes[1]!, "ringlimit_shadow_allowed_total", '{namespace="test"}'), undefined, "not on the owner: it answered nobody");
  });

  await t.test("a batch across owners: each item gets its owner's override", async (t) => {
    const items = [cluster.identifierOwnedBy(0, "big-batch"), cluster.identifierOwnedBy(1, "big-batch"), cluster.identifierOwnedBy(2, "plain-batch")];
    const r = await post(nodes[0]!.url, "/limit/batch", { requests: items.map((identifier) => ({ namespace: "test", identifier, limit: 5, duration: 3600 })) });
    t.equal(r.status, 200);
    t.same(
      r.json.data.results.map((x: { limit: number; remaining: number }) => [x.limit, x.remaining]),
      [
        [50, 49],
        [50, 49],
        [5, 4],
      ],
    );
    const denied = await post(nodes[0]!.url, "/limit/batch", {
      requests: [items[1], cluster.identifierOwnedBy(2, "deny-batch")].map((identifier) => ({ namespace: "test", identifier, limit: 5, duration: 3600 })),
    });
    t.equal(denied.status, 429, "a deny-listed item on another owner refuses the batch");
    t.same(
      denied.json.data.results.map((x: { limit: number }) => x.limit),
      [50, 0],
    );
    const after = await hit(nodes[2]!, items[1]!, 5, { cost: 0 });
    t.equal(after.json.data.remaining, 49, "the refused batch counted nothing");
  });
});

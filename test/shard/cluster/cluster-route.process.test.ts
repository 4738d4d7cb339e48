/**
 * GET /cluster on a real 3-node cluster: every node tells clients the same members, each
 * with the URL it listens on (learnt over the peer channel), under the same ring version;
 * when a member dies the survivors' version changes, on /cluster and on every answer.
 */
import t from "tap";
import { AUTH_HEADER, closeAgents, request } from "../../harness/http-client.js";
import { hit, startCluster, waitForRing } from "../../harness/cluster.js";
import type { NodeProcess } from "../../harness/node-process.js";
import { sleep } from "../../harness/wait.js";

t.teardown(closeAgents);

async function views(nodes: NodeProcess[]) {
  return Promise.all(nodes.map(async (n) => (await request(n.url + "/cluster", { headers: AUTH_HEADER })).json.data));
}

/** Until every node answers with every member's URL known (the exchange runs when peers come up). */
async function converged(nodes: NodeProcess[], size: number) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const v = await views(nodes);
    const versions = new Set(v.map((x) => x.ring_version));
    if (versions.size === 1 && v.every((x) => x.members.length === size && x.members.every((m: { url: string | null }) => m.url !== null))) return v;
    if (Date.now() > deadline) throw new Error("views did not converge: " + JSON.stringify(v));
    await sleep(50);
  }
}

t.test("3 nodes: one view, every URL, one version; a death changes it", async (t) => {
  const cluster = await startCluster(3);
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes.map((n) => n!);
  const v = await converged(nodes, 3);
  t.same(
    v[0].members.map((m: { id: string; url: string }) => ({ id: m.id, url: m.url })),
    cluster.members.map((id, i) => ({ id, url: nodes[i]!.url })).sort((a, b) => (a.id < b.id ? -1 : 1)),
    "members are the ring names, each with its node's URL",
  );
  t.same(
    v.map((x) => x.self),
    cluster.members,
  );
  const version = v[0].ring_version;
  const r = await hit(nodes[1]!, "someone");
  t.equal(r.headers["ringlimit-ring-version"], version, "answers carry it");

  await nodes[2]!.kill();
  cluster.nodes[2] = undefined;
  await waitForRing(nodes.slice(0, 2), 2);
  const after = await converged(nodes.slice(0, 2), 2);
  t.not(after[0].ring_version, version);
  t.same(
    after[0].members.map((m: { id: string }) => m.id),
    cluster.members.slice(0, 2).sort(),
  );
  t.equal((await hit(nodes[0]!, "someone")).headers["ringlimit-ring-version"], after[0].ring_version);
});

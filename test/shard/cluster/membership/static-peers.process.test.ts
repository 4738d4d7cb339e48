/**
 * Scaling with a static PEERS list (issue 32 item 4), node by node as an operator edits it:
 * a node given another list than the members it reaches keeps them out of its ring (and they
 * it), is not ready while it lacks a majority given its own list, and decides no key then
 * (its answers are degraded, uncounted). Before, a fourth node listing four members beside
 * three listing three built its own ring, reported ready and decided its keys anyway (+20 per
 * key of limit 30; +27 while the lists were being edited).
 */
import t from "tap";
import { AUTH_HEADER, closeAgents, limit, request } from "../../../harness/http-client.js";
import { metric, startCluster } from "../../../harness/cluster.js";
import { spawnNode, type NodeProcess } from "../../../harness/node-process.js";
import { freePort } from "../../../harness/ports.js";
import { until } from "../../../harness/wait.js";

t.teardown(closeAgents);

const status = async (n: NodeProcess) => (await request(n.url + "/ready")).status;

/** Round-robin over `nodes`, `perKey` requests of each key in flight at once; per key, the answers allowed undegraded. */
async function burst(nodes: NodeProcess[], keys: string[], lim: number, perKey: number): Promise<number[]> {
  const admitted = keys.map(() => 0);
  const sends: Promise<void>[] = [];
  for (let i = 0; i < perKey; i++) {
    keys.forEach((id, k) => {
      sends.push(
        limit(nodes[(i + k) % nodes.length]!.url, { namespace: "peers", identifier: id, limit: lim, duration: 3600 }).then((r) => {
          if (r.status === 200 && r.json.data.degraded !== true) admitted[k]!++;
        }),
      );
    });
  }
  await Promise.all(sends);
  return admitted;
}

t.test("a fourth node, then the first, given a list of four beside members listing three", async (t) => {
  const cluster = await startCluster(3);
  t.teardown(() => cluster.stop());
  const [a, b, c] = cluster.nodes.map((n) => n!);
  const dPeer = await freePort();
  const four = [...cluster.members, `127.0.0.1:${dPeer}`].join(",");
  const d = await spawnNode({ ...cluster.env[0]!, PORT: String(await freePort()), PEER_PORT: String(dPeer), PEERS: four }, { waitReady: false });
  t.teardown(() => d.kill());

  await until("the new node says why it keeps the others out", () => /was given another PEERS list/.test(d.output()), 30_000);
  await until("the new node is not ready", async () => (await status(d).catch(() => 0)) === 503, 30_000);
  for (const n of [a, b, c]) t.equal(await metric(n, "ringlimit_ring_members"), 3, "the members listing three keep their ring of three");

  const adding = await burst([a!, b!, c!, d], ["k1", "k2", "k3", "k4"], 30, 60);
  t.same(adding, [30, 30, 30, 30], "30 of 60 admitted per key: the new node decides none");
  const answer = await limit(d.url, { namespace: "peers", identifier: "k9", limit: 30, duration: 3600 });
  t.equal(answer.json.data.degraded, true, "the new node's own answers are degraded: uncounted");

  // The operator edits the first member's PEERS and restarts it: it now agrees with the new
  // node only, a minority of its list of four, and is out of service until more follow.
  await a!.kill();
  const a2 = await spawnNode({ ...cluster.env[0]!, PEERS: four }, { waitReady: false });
  t.teardown(() => a2.kill());
  await until("the edited member is not ready", async () => (await status(a2).catch(() => 0)) === 503 && /another PEERS list/.test(a2.output()), 30_000);
  await until(
    "the two unedited members form a ring of two",
    async () => (await metric(b!, "ringlimit_ring_members")) === 2 && (await metric(c!, "ringlimit_ring_members")) === 2,
    30_000,
  );
  t.equal(await status(b!), 200, "the unedited majority stays ready");
  const editing = await burst([a2, b!, c!, d], ["e1", "e2", "e3", "e4"], 30, 60);
  t.same(editing, [30, 30, 30, 30], "30 of 60 per key while PEERS is being edited");
  const cluster2 = (await request(b!.url + "/cluster", { headers: AUTH_HEADER })).json.data;
  t.equal(cluster2.members.length, 2, "GET /cluster lists the ring that counts");
});

/**
 * Rolling upgrades (issue 32 item 3): nodes of different peer protocol versions in one cluster
 * form ONE ring, run at the lowest version they share, and count every key once. A node of 11
 * beside two of 12 (PEER_PROTOCOL_MAX pins it, the operator's setting): before ranges, a
 * handshake of another version was refused and each side formed its own ring, admitting
 * exactly twice every limit. When RINGLIMIT_OLD_MAIN names an older build's dist/src/main.js
 * (a checkout of 3ff6668, the last release of protocol 11 only, built there), the same runs
 * with that real build in the third place.
 */
import { existsSync } from "node:fs";
import t from "tap";
import { AUTH_HEADER, closeAgents, limit, request } from "../../harness/http-client.js";
import { CLUSTER_SECRET, PATIENT_PEERS, waitForRing } from "../../harness/cluster.js";
import { spawnNode, type NodeProcess } from "../../harness/node-process.js";
import { freePort } from "../../harness/ports.js";
import { until } from "../../harness/wait.js";
import { PROTOCOL_MIN, PROTOCOL_VERSION } from "../../../src/peer/wire/constants.js";

t.teardown(closeAgents);

/** Three nodes listing each other; `extra(i)` adds variables to node i, `main(i)` another build. */
async function startMixed(extra: (i: number) => Record<string, string>, main: (i: number) => string | undefined = () => undefined): Promise<NodeProcess[]> {
  const http = [await freePort(), await freePort(), await freePort()];
  const peer = [await freePort(), await freePort(), await freePort()];
  const peers = peer.map((p) => `127.0.0.1:${p}`).join(",");
  const env = (i: number) => ({
    PORT: String(http[i]),
    PEER_HOST: "127.0.0.1",
    PEER_PORT: String(peer[i]),
    PEERS: peers,
    CLUSTER_SECRET,
    ...PATIENT_PEERS,
    ...extra(i),
  });
  return Promise.all([0, 1, 2].map((i) => spawnNode(env(i), { ...(main(i) !== undefined ? { main: main(i)! } : {}) })));
}

const clusterOf = async (n: NodeProcess) => (await request(n.url + "/cluster", { headers: AUTH_HEADER })).json.data;

/**
 * Every node gets requests for every key, round-robin, all in flight at once (what a
 * Kubernetes Service in front of the pods makes of a burst). Returns, per key, the answers
 * allowed without `degraded`: what was admitted as counted.
 */
async function burst(nodes: NodeProcess[], keys: string[], lim: number, perKey: number): Promise<number[]> {
  const admitted = keys.map(() => 0);
  const sends: Promise<void>[] = [];
  for (let i = 0; i < perKey; i++) {
    keys.forEach((id, k) => {
      const node = nodes[(i + k) % nodes.length]!;
      sends.push(
        limit(node.url, { namespace: "upgrade", identifier: id, limit: lim, duration: 3600 }).then((r) => {
          if (r.status === 200 && r.json.data.degraded !== true) admitted[k]!++;
        }),
      );
    });
  }
  await Promise.all(sends);
  return admitted;
}

t.test("a node pinned to protocol 11 beside two of 12: one ring at 11, every limit held", async (t) => {
  const nodes = await startMixed((i): Record<string, string> => (i === 0 ? { PEER_PROTOCOL_MAX: String(PROTOCOL_MIN) } : {}));
  t.teardown(() => Promise.all(nodes.map((n) => n.kill())));
  await waitForRing(nodes, 3, 60_000);
  await until("every node runs its ring at 11", async () => (await Promise.all(nodes.map(clusterOf))).every((c) => c.protocol?.ring === PROTOCOL_MIN), 15_000);
  const views = await Promise.all(nodes.map(clusterOf));
  t.same(views[0].protocol, { min: PROTOCOL_MIN, max: PROTOCOL_MIN, ring: PROTOCOL_MIN }, "the pinned node speaks 11 only");
  t.same(views[1].protocol, { min: PROTOCOL_MIN, max: PROTOCOL_VERSION, ring: PROTOCOL_MIN }, "the others speak up to the build's newest, and run at 11");
  t.match(views[2].build, /^\d+\.\d+\.\d+/, "GET /cluster names the build");

  // Limits below shares (30) and where shares apply (2,048): nothing admitted beyond either.
  const small = await burst(nodes, ["a", "b", "c", "d"], 30, 45);
  t.same(small, [30, 30, 30, 30], "30 of 45 admitted per key, every node counting on one ring");
  const [large] = await burst(nodes, ["big"], 2048, 2200);
  t.ok(large! <= 2048, `${large} of 2,200 admitted undegraded on a limit of 2,048`);
  t.ok(large! >= 2048 - 2 * 128, `${large}: at most the shares the owner holds back for the others go unused`);

  // The last node upgraded (restarted without the pin): the ring moves to 12 everywhere.
  await nodes[0]!.kill();
  nodes[0] = await spawnNode({ ...nodes[0]!.env, PEER_PROTOCOL_MAX: String(PROTOCOL_VERSION) });
  await waitForRing(nodes, 3, 60_000);
  await until(
    "every node runs its ring at the build's newest",
    async () => (await Promise.all(nodes.map(clusterOf))).every((c) => c.protocol?.ring === PROTOCOL_VERSION),
    15_000,
  );
  t.pass(`ring at ${PROTOCOL_VERSION} once every member speaks it`);
});

const OLD_MAIN = process.env.RINGLIMIT_OLD_MAIN;
t.test(
  "a real build of protocol 11 only (RINGLIMIT_OLD_MAIN) beside two of this build",
  { skip: OLD_MAIN === undefined || !existsSync(OLD_MAIN) ? "RINGLIMIT_OLD_MAIN names no build" : false },
  async (t) => {
    const nodes = await startMixed(
      () => ({}),
      (i) => (i === 2 ? OLD_MAIN : undefined),
    );
    t.teardown(() => Promise.all(nodes.map((n) => n.kill())));
    await waitForRing(nodes, 3, 60_000);
    await until(
      "the new nodes run their ring at 11",
      async () => (await Promise.all(nodes.slice(0, 2).map(clusterOf))).every((c) => c.protocol?.ring === PROTOCOL_MIN),
      15_000,
    );
    const small = await burst(nodes, ["a", "b", "c", "d"], 30, 45);
    t.same(small, [30, 30, 30, 30], "30 of 45 admitted per key with the old build in the ring");
    const [large] = await burst(nodes, ["big"], 2048, 2200);
    t.ok(large! <= 2048, `${large} of 2,200 admitted undegraded on a limit of 2,048`);
  },
);

import { generateClusterSecret } from "../../src/config.js";
import { HashRing } from "../../src/shard/ring/ring.js";
import { ringKeyOf } from "../../src/shard/ring/state-key.js";
import { request, limit } from "./http-client.js";
import { freePort, spawnNode, type NodeProcess } from "./node-process.js";

/** A fresh strong secret per test process, as `npm run keygen` makes them. */
export const CLUSTER_SECRET = generateClusterSecret();

export interface TestCluster {
  nodes: (NodeProcess | undefined)[];
  /** ring names (`127.0.0.1:peerPort`) by node index */
  members: string[];
  env: Record<string, string>[];
  /** index of the node owning (namespace, identifier) on the full ring */
  ownerOf(namespace: string, identifier: string, members?: string[]): number;
  /** an identifier whose owner (on the full ring, or the given members) is node `index` */
  identifierOwnedBy(index: number, prefix?: string, members?: string[]): string;
  restart(index: number): Promise<NodeProcess>;
  stop(): Promise<void>;
}

/** Start n real node processes on loopback that list each other in PEERS; `perNode` adds variables to one node (a STATE_DIR each). */
export async function startCluster(
  n: number,
  extraEnv: Record<string, string> = {},
  perNode: (index: number) => Record<string, string> = () => ({}),
): Promise<TestCluster> {
  const httpPorts: number[] = [];
  const peerPorts: number[] = [];
  for (let i = 0; i < n; i++) {
    httpPorts.push(await freePort());
    peerPorts.push(await freePort());
  }
  const members = peerPorts.map((p) => `127.0.0.1:${p}`);
  const env = httpPorts.map((port, i) => ({
    PORT: String(port),
    PEER_HOST: "127.0.0.1",
    PEER_PORT: String(peerPorts[i]),
    PEERS: members.join(","),
    CLUSTER_SECRET,
    LOG_LEVEL: "warn",
    PEER_TIMEOUT_MS: "100",
    HEARTBEAT_INTERVAL_MS: "100",
    FAILURE_TIMEOUT_MS: "600",
    DRAIN_TIMEOUT_MS: "5000",
    ...extraEnv,
    ...perNode(i),
  }));
  const nodes: (NodeProcess | undefined)[] = await Promise.all(env.map((e) => spawnNode(e)));
  const cluster: TestCluster = {
    nodes,
    members,
    env,
    ownerOf(namespace, identifier, on = members) {
      return members.indexOf(new HashRing(on).owner(ringKeyOf(namespace, identifier))!);
    },
    identifierOwnedBy(index, prefix = "id", on = members) {
      for (let i = 0; ; i++) {
        const id = `${prefix}-${i}`;
        if (cluster.ownerOf("test", id, on) === index) return id;
      }
    },
    async restart(index) {
      await nodes[index]?.kill();
      nodes[index] = await spawnNode(env[index]!);
      return nodes[index]!;
    },
    async stop() {
      await Promise.all(nodes.map((node) => node?.kill()));
    },
  };
  await waitForRing(
    nodes.filter((x): x is NodeProcess => x !== undefined),
    n,
  );
  return cluster;
}

/** A gauge's value from a node's /metrics. */
export async function metric(node: NodeProcess, name: string, labels = ""): Promise<number | undefined> {
  const r = await request(node.url + "/metrics", { timeoutMs: 2000 });
  const line = r.text.split("\n").find((l) => l.startsWith(name + labels + " ") || (labels === "" && l.startsWith(name + " ")));
  return line === undefined ? undefined : Number(line.split(" ")[1]);
}

/** Wait until every given node's ring holds `size` members. */
export async function waitForRing(nodes: NodeProcess[], size: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const sizes = await Promise.all(nodes.map((n) => metric(n, "ringlimit_ring_members").catch(() => undefined)));
    if (sizes.every((s) => s === size)) return;
    if (Date.now() > deadline) throw new Error(`rings did not converge to ${size}: ${sizes.join(",")}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** POST /limit on namespace "test". */
export function hit(node: NodeProcess, identifier: string, lim = 1000, extra: Record<string, unknown> = {}) {
  return limit(node.url, { namespace: "test", identifier, limit: lim, duration: 3600, ...extra });
}

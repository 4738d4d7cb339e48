import { HashRing } from "../../src/shard/ring/ring.js";
import { ringKeyOf } from "../../src/shard/ring/state-key.js";
import { CLUSTER_SECRET, metric } from "../harness/cluster.js";
import { request } from "../harness/http-client.js";
import { spawnNode, type NodeProcess } from "../harness/node-process.js";
import type { FaultNet } from "./net/netns.js";
import { sleep } from "../harness/wait.js";

const HTTP_PORT = 8080;
const PEER_PORT = 9080;

/**
 * Three ringlimit processes, one per namespace of `net`, on the defaults an operator
 * gets (heartbeat 200 ms, failure timeout 1 s, peer deadline 100 ms). Only the drain is
 * shortened, to keep the suite's time bounded.
 */
export interface NsCluster {
  readonly nodes: (NodeProcess | undefined)[];
  readonly urls: readonly string[];
  readonly members: readonly string[];
  /** (re)start node i, with extra environment (LD_PRELOAD for a skewed clock, say) */
  start(i: number): Promise<NodeProcess>;
  /** index of the node owning an identifier of the suite's namespace on the full ring */
  ownerOf(identifier: string): number;
  stop(): Promise<void>;
}

export async function startNsCluster(
  net: FaultNet,
  env: Record<string, string> = {},
  perNode: Record<number, Record<string, string>> = {},
): Promise<NsCluster> {
  const members = net.nodes.map((n) => `${n.ip}:${PEER_PORT}`);
  const nodes: (NodeProcess | undefined)[] = net.nodes.map(() => undefined);
  const envOf = (i: number): Record<string, string> => ({
    HOST: net.nodes[i]!.ip,
    PORT: String(HTTP_PORT),
    PEER_HOST: net.nodes[i]!.ip,
    PEER_PORT: String(PEER_PORT),
    PEERS: members.join(","),
    CLUSTER_SECRET,
    LOG_LEVEL: "info",
    DRAIN_TIMEOUT_MS: "6000",
    ...env,
    ...perNode[i],
  });
  const ring = new HashRing(members);
  const cluster: NsCluster = {
    nodes,
    urls: net.nodes.map((n) => `http://${n.ip}:${HTTP_PORT}`),
    members,
    async start(i) {
      await nodes[i]?.kill();
      nodes[i] = await spawnNode(envOf(i), { wrap: net.wrap(i) });
      return nodes[i]!;
    },
    ownerOf: (identifier) => members.indexOf(ring.owner(ringKeyOf("faults", identifier))!),
    async stop() {
      await Promise.all(nodes.map((n) => n?.kill()));
    },
  };
  try {
    await Promise.all(net.nodes.map((_, i) => cluster.start(i)));
    await waitUntil(async () => (await ringSizes(nodes)).every((s) => s === members.length), 15_000, "full ring at start");
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}

export function ringSizes(nodes: readonly (NodeProcess | undefined)[]): Promise<(number | undefined)[]> {
  return Promise.all(nodes.map((n) => (n === undefined ? undefined : metric(n, "ringlimit_ring_members").catch(() => undefined))));
}

export async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** Each node's ring size and /ready status every `intervalMs`, for timelines ("full ring N ms after the heal"). */
export class RingWatch {
  readonly timeline: { at: number; sizes: (number | undefined)[]; ready: (boolean | undefined)[] }[] = [];
  private running = false;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly nodes: readonly (NodeProcess | undefined)[],
    private readonly intervalMs = 100,
  ) {}

  start(): void {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        const at = Date.now();
        const [sizes, ready] = await Promise.all([ringSizes(this.nodes), Promise.all(this.nodes.map((n) => readiness(n)))]);
        this.timeline.push({ at, sizes, ready });
        await sleep(Math.max(0, this.intervalMs - (Date.now() - at)));
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  /** ms after `from` of the first sample (at or after it) where `pred` holds */
  firstAfter(from: number, pred: (sizes: (number | undefined)[], ready: (boolean | undefined)[]) => boolean): number | undefined {
    const hit = this.timeline.find((s) => s.at >= from && pred(s.sizes, s.ready));
    return hit === undefined ? undefined : hit.at - from;
  }
}

async function readiness(n: NodeProcess | undefined): Promise<boolean | undefined> {
  if (n === undefined) return undefined;
  try {
    return (await request(n.url + "/ready", { timeoutMs: 500 })).status === 200;
  } catch {
    return undefined;
  }
}

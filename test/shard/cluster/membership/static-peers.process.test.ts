/**
 * Scaling with a static PEERS list, node by node as a StatefulSet rollout edits it (issue 41
 * item 2): every node is restarted with the new list while a loader keeps asking the nodes
 * that serve. Each node's ring is its own list less the members some member up does not list
 * (member-lists.ts), so the old list's and the new list's holders build one ring, and
 * decisions keep being counted. Before, members given different lists kept each other out of
 * their rings and a node was ready only with a majority of its own list: scaling 4 -> 3, no
 * decision was counted for ~4 s, and ~14 % of answers were degraded for 2 s scaling 3 -> 4.
 *
 * Figures (the degraded share, the longest stretch without a counted decision) are printed as
 * comments; what is asserted is what must hold however slow the machine: no key over its
 * limit, every answer 200 or 429, and each node ready once restarted.
 */
import t, { type Test } from "tap";
import { closeAgents, limit, request } from "../../../harness/http-client.js";
import { metric, startCluster } from "../../../harness/cluster.js";
import { spawnNode, type NodeProcess } from "../../../harness/node-process.js";
import { freePort } from "../../../harness/ports.js";
import { sleep } from "../../../harness/wait.js";

t.teardown(closeAgents);

/** Keys of the exactness check: each is asked `2 * EXACT_LIMIT` times over the rollout. */
const EXACT_KEYS = 8;
const EXACT_LIMIT = 40;
/** Width of the buckets the gaps are measured in. */
const BUCKET_MS = 100;

interface Tally {
  counted: number;
  degraded: number;
  failed: number;
  /** undegraded 200s per exact key */
  admitted: number[];
  /** per bucket since start: counted, degraded */
  buckets: Map<number, [number, number]>;
  other: number;
}

/**
 * Asks the nodes in `live` (round-robin, 4 in flight) until `stop()` is called: big-limit keys
 * to measure the share of degraded answers, and the exact keys. Nodes leave `live` before
 * their SIGTERM and come back once ready, as a Service's endpoints follow readiness.
 */
function loader(live: NodeProcess[]): { tally: Tally; stop: () => Promise<void> } {
  const tally: Tally = { counted: 0, degraded: 0, failed: 0, admitted: new Array(EXACT_KEYS).fill(0), buckets: new Map(), other: 0 };
  const started = Date.now();
  let running = true;
  let n = 0;
  const worker = async (): Promise<void> => {
    while (running) {
      const node = live[n++ % Math.max(1, live.length)];
      if (node === undefined) {
        await sleep(10);
        continue;
      }
      const i = n;
      const exact = i % 10 === 0 ? (i / 10) % EXACT_KEYS : -1;
      const body =
        exact >= 0
          ? { namespace: "peers", identifier: `exact-${exact}`, limit: EXACT_LIMIT, duration: 3600 }
          : { namespace: "peers", identifier: `share-${i % 500}`, limit: 1_000_000, duration: 3600 };
      try {
        const r = await limit(node.url, body);
        const bucket = Math.floor((Date.now() - started) / BUCKET_MS);
        const b = tally.buckets.get(bucket) ?? [0, 0];
        tally.buckets.set(bucket, b);
        if (r.status === 200 && r.json.data.degraded === true) {
          tally.degraded++;
          b[1]++;
        } else if (r.status === 200 || r.status === 429) {
          tally.counted++;
          b[0]++;
          if (r.status === 200 && exact >= 0) tally.admitted[exact]!++;
        } else tally.other++;
      } catch {
        tally.failed++; // a node that stopped between being picked and answering
      }
    }
  };
  const workers = [worker(), worker(), worker(), worker()];
  return {
    tally,
    stop: async () => {
      running = false;
      await Promise.all(workers);
    },
  };
}

/** The longest run of buckets with answers but none counted, and the degraded share. */
function summary(tally: Tally): { share: number; longestMs: number } {
  let longest = 0;
  let run = 0;
  const last = Math.max(...tally.buckets.keys());
  for (let b = 0; b <= last; b++) {
    const [counted] = tally.buckets.get(b) ?? [0, 0];
    run = counted === 0 ? run + 1 : 0;
    longest = Math.max(longest, run);
  }
  return { share: tally.degraded / Math.max(1, tally.degraded + tally.counted), longestMs: longest * BUCKET_MS };
}

async function stopGracefully(node: NodeProcess, live: NodeProcess[]): Promise<void> {
  const at = live.indexOf(node);
  if (at >= 0) live.splice(at, 1);
  node.signal("SIGTERM");
  await node.exited;
}

function checkExact(t: Test, tally: Tally, label: string): void {
  const summed = summary(tally);
  t.comment(
    `${label}: ${tally.counted} counted, ${tally.degraded} degraded (${(summed.share * 100).toFixed(2)} %), ${tally.failed} refused connections, longest stretch without a counted decision ${summed.longestMs} ms`,
  );
  t.equal(tally.other, 0, "every answer is 200 or 429");
  for (const [k, n] of tally.admitted.entries()) t.ok(n <= EXACT_LIMIT, `exact key ${k}: ${n} admitted, at most ${EXACT_LIMIT}`);
}

t.test("scale in 4 -> 3: the leaving member stops first, then each member restarts with the list of three", async (t) => {
  const cluster = await startCluster(4);
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes.map((n) => n!);
  const live = [...nodes];
  const three = cluster.members.slice(0, 3).join(",");
  const load = loader(live);
  await sleep(500);
  await stopGracefully(nodes[3]!, live);
  for (const i of [2, 1, 0]) {
    await stopGracefully(nodes[i]!, live);
    nodes[i] = await spawnNode({ ...cluster.env[i]!, PEERS: three });
    cluster.nodes[i] = nodes[i];
    live.push(nodes[i]!);
    t.equal((await request(nodes[i]!.url + "/ready")).status, 200, `member ${i} ready with the list of three`);
  }
  await sleep(500);
  await load.stop();
  cluster.nodes[3] = undefined;
  checkExact(t, load.tally, "4 -> 3");
  t.ok(load.tally.counted > 0, "decisions were counted");
});

t.test("scale out 3 -> 4: the new member starts with the list of four, then each member restarts with it", async (t) => {
  const cluster = await startCluster(3);
  t.teardown(() => cluster.stop());
  const nodes = cluster.nodes.map((n) => n!);
  const dPeer = await freePort();
  const four = [...cluster.members, `127.0.0.1:${dPeer}`].join(",");
  const live = [...nodes];
  const load = loader(live);
  await sleep(500);
  // Ready at once: the members it reaches list three, so it owns no key and forwards every one.
  const d = await spawnNode({ ...cluster.env[0]!, PORT: String(await freePort()), PEER_PORT: String(dPeer), PEERS: four });
  t.teardown(() => d.kill());
  live.push(d);
  for (const i of [2, 1, 0]) {
    await stopGracefully(nodes[i]!, live);
    nodes[i] = await spawnNode({ ...cluster.env[i]!, PEERS: four });
    cluster.nodes[i] = nodes[i];
    live.push(nodes[i]!);
    t.equal((await request(nodes[i]!.url + "/ready")).status, 200, `member ${i} ready with the list of four`);
  }
  await sleep(500);
  await load.stop();
  checkExact(t, load.tally, "3 -> 4");
  t.equal(await metric(d, "ringlimit_ring_members"), 4, "the new member is on the ring once every list names it");
});

import t, { type Test } from "tap";
import { closeAgents } from "../../harness/http-client.js";
import { hit, metric, startCluster, waitForRing, type TestCluster } from "../../harness/cluster.js";
import { runWorkers, type NodeProcess } from "../../harness/node-process.js";
import { sleep } from "../../harness/wait.js";
import { SHARE_MIN_LIMIT, shareOf } from "../../../src/shard/local/share-rule.js";
import { LIBFAKETIME } from "../../harness/faketime.js";

// Issue 32, skewed hand-offs: node 0 fills a window of a key, then hands it to node 1, whose
// clock is SKEW_S behind or ahead, so node 1's window ends while node 0's would still run.
// Invariant (algorithms/ages.ts windowFromAges): a handed-off count is never released
// before the sender's window would have ended. Before, node 1 put it into its own current
// window and admitted the whole limit again when that ended: 2× the limit within node 0's window.

t.teardown(closeAgents);
// Six hand-offs, each waiting for a window end 22 to 70 s away (three tries each at most on a loaded machine).
t.setTimeout(600_000);

const SKEW_S = 30;
const LIMIT = 20;
/** Node 1's window ends this many seconds after the window length is chosen: time for the hand-off, not for much more. */
const NODE1_END_S = [22, 45] as const;
/** A hand-off that came later than this before node 1's window end is tried again on a new cluster (a loaded machine). */
const ATTEMPTS = 3;

interface Geometry {
  windowS: number;
  /** node 1's window end, unix s on the test's clock */
  node1End: number;
  /** node 0's window end, unix s on the test's clock */
  node0End: number;
}

/** A window length whose end on node 1 comes within NODE1_END_S, and on node 0 `after` seconds (a range) later. */
async function geometry(sign: number, after: readonly [number, number]): Promise<Geometry> {
  // Some starts fit no length, and they come in runs: a 30 s skew behind with a gap of 20 to 40 s
  // fits only windows of 60 to 70 s, so about 1 start in 4 fits none, up to 34 s in a row
  // (computed over every second of three days). Try again each second for up to 60 s.
  for (let tries = 0; tries < 60; tries++) {
    if (tries > 0) await sleep(1000);
    const now = Date.now() / 1000;
    for (let d = 60; d <= 7200; d++) {
      const node0Left = d - (now % d);
      const node1Left = d - ((((now + sign * SKEW_S) % d) + d) % d);
      const gap = node0Left - node1Left;
      if (node1Left >= NODE1_END_S[0] && node1Left <= NODE1_END_S[1] && gap >= after[0] && gap <= after[1]) {
        return { windowS: d, node1End: now + node1Left, node0End: now + node0Left };
      }
    }
  }
  throw new Error("no window length from 60 to 7200 s fits");
}

interface HandedOff extends Geometry {
  limit: number;
  cluster: TestCluster;
  node0: NodeProcess;
  id: string;
  fw: { algorithm: string; duration: number };
}

/**
 * Two real nodes, node 1 on a clock SKEW_S off (libfaketime). With node 1 away, node 0 decides
 * a key of node 1's and admits `limit` in its window; node 1 comes back and receives the key
 * before its own window ends. undefined: the hand-off came too late on this machine.
 */
async function handOff(t: Test, algorithm: string, sign: number, after: readonly [number, number], limit = LIMIT): Promise<HandedOff | undefined> {
  const skewed = { LD_PRELOAD: LIBFAKETIME!, FAKETIME: `${sign < 0 ? "-" : "+"}${SKEW_S}s`, FAKETIME_DONT_FAKE_MONOTONIC: "1" };
  const cluster = await startCluster(2, { LOG_LEVEL: "info" }, (i) => (i === 1 ? skewed : {}));
  t.teardown(() => cluster.stop());
  const node0 = cluster.nodes[0]!;
  const id = cluster.identifierOwnedBy(1, "skewed");

  // Node 1 away: node 0 decides the key and fills its window.
  cluster.nodes[1]!.signal("SIGTERM");
  await cluster.nodes[1]!.exited;
  const g = await geometry(sign, after);
  const fw = { algorithm, duration: g.windowS };
  let filled = 0;
  for (let i = 0; i < limit + 5; i++) if ((await hit(node0, id, limit, fw)).json.data.allowed === true) filled++;
  // Under WORKERS=2 (5 runs of 6 at load 4 to 14, never with WORKERS=1 in the same runs) one or
  // both shared fills admitted 2,032 of 2,048 on node 0 alone: its first answer already read
  // count 17, so one share (16) was counted on the key before any request of the fill, with no
  // answer for it; once one run's node 1 had the key, a peek was allowed there (it held less
  // than the limit). Not yet explained (issue 40).
  const todo = runWorkers() > 1 && limit >= SHARE_MIN_LIMIT ? "WORKERS > 1: node 0 alone sometimes admits its limit less one share (issue 40)" : false;
  t.equal(filled, limit, "node 0 admits the limit in its window", { todo });

  // Node 1 back: node 0 hands the key to it before node 1's window ends.
  const back = await cluster.restart(1);
  await waitForRing([node0, back], 2);
  while (Date.now() / 1000 < g.node1End - 1 && ((await metric(back, "ringlimit_stored_keys")) ?? 0) < 1) await sleep(50);
  if (Date.now() / 1000 >= g.node1End - 1) {
    t.comment(`the hand-off came after node 1's window ended (${algorithm}, skew ${sign * SKEW_S} s): again`);
    await cluster.stop();
    return undefined;
  }
  t.equal(await metric(back, "ringlimit_stored_keys"), 1, "node 1 received the key");
  const before = await hit(node0, id, limit, { ...fw, cost: 0 });
  t.notOk(before.json.data.degraded, "decided by node 1");
  t.not(before.json.data.allowed, true, "node 1 holds the count", { todo });
  return { ...g, limit, cluster, node0, id, fw };
}

/** Requests admitted undegraded, of `n` sent now. */
async function admitted(h: HandedOff, n: number): Promise<number> {
  let count = 0;
  for (let i = 0; i < n; i++) {
    const r = await hit(h.node0, h.id, h.limit, h.fw);
    if (r.json.data.allowed === true && !r.json.data.degraded) count++;
  }
  return count;
}

for (const sign of [-1, 1]) {
  const direction = sign < 0 ? "behind" : "ahead";
  t.test(`fixed window filled on node 0, handed to node 1 ${SKEW_S} s ${direction}: nothing admitted again before node 0's window ends`, async (t) => {
    if (LIBFAKETIME === undefined) return t.plan(0, "libfaketime not installed (Debian: apt-get install -y libfaketime)");
    let h: HandedOff | undefined;
    for (let attempt = 0; attempt < ATTEMPTS && h === undefined; attempt++) h = await handOff(t, "fixed-window", sign, [15, Infinity]);
    if (h === undefined) throw new Error(`no hand-off before node 1's window ended in ${ATTEMPTS} attempts`);
    // Past node 1's window end, within node 0's window: still full.
    await sleep(Math.max(0, (h.node1End + 1) * 1000 - Date.now()));
    const n = await admitted(h, LIMIT);
    t.comment(`fixed window, skew ${sign * SKEW_S} s: admitted undegraded after node 1's window ended: ${n} of ${LIMIT}`);
    t.equal(n, 0, "nothing admitted again within node 0's window");
    t.ok(Date.now() / 1000 < h.node0End, "asked within node 0's window");
  });
}

for (const sign of [-1, 1]) {
  const direction = sign < 0 ? "behind" : "ahead";
  t.test(`sliding window filled on node 0, handed to node 1 ${SKEW_S} s ${direction}: nothing admitted again while node 0's window is full`, async (t) => {
    if (LIBFAKETIME === undefined) return t.plan(0, "libfaketime not installed (Debian: apt-get install -y libfaketime)");
    let h: HandedOff | undefined;
    for (let attempt = 0; attempt < ATTEMPTS && h === undefined; attempt++) h = await handOff(t, "sliding-window", sign, [20, 40]);
    if (h === undefined) throw new Error(`no hand-off before node 1's window ended in ${ATTEMPTS} attempts`);
    // Node 0's window still runs, so its count weighs whole there; on node 1, whose window ended
    // first, it would weigh less and less as its previous window's.
    await sleep(Math.max(0, (h.node0End - 2) * 1000 - Date.now()));
    const n = await admitted(h, LIMIT);
    t.comment(
      `sliding window ${h.windowS} s, skew ${sign * SKEW_S} s: admitted undegraded ${Math.round(h.node0End - h.node1End)} s after node 1's window ended: ${n} of ${LIMIT}`,
    );
    t.equal(n, 0, "nothing admitted again within node 0's window");
    t.ok(Date.now() / 1000 < h.node0End, "asked within node 0's window");
  });
}

for (const sign of [-1, 1]) {
  const direction = sign < 0 ? "behind" : "ahead";
  t.test(
    `shared fixed window (limit ${SHARE_MIN_LIMIT}) handed to node 1 ${SKEW_S} s ${direction}: at most node 0's share of node 1's next window`,
    async (t) => {
      if (LIBFAKETIME === undefined) return t.plan(0, "libfaketime not installed (Debian: apt-get install -y libfaketime)");
      let h: HandedOff | undefined;
      for (let attempt = 0; attempt < ATTEMPTS && h === undefined; attempt++) h = await handOff(t, "fixed-window", sign, [15, Infinity], SHARE_MIN_LIMIT);
      if (h === undefined) throw new Error(`no hand-off before node 1's window ended in ${ATTEMPTS} attempts`);
      await sleep(Math.max(0, (h.node1End + 1) * 1000 - Date.now()));
      // Node 1 holds the carried count; node 0, now a member, may answer its share by rule of
      // node 1's next window, which began (on node 1's clock) before node 0's window ends.
      const n = await admitted(h, SHARE_MIN_LIMIT + 100);
      const share = shareOf(0, SHARE_MIN_LIMIT);
      t.comment(
        `shared fixed window, skew ${sign * SKEW_S} s: admitted undegraded after node 1's window ended: ${n} of ${SHARE_MIN_LIMIT + 100} (a share is ${share})`,
      );
      t.ok(n <= share, "no more than node 0's share of node 1's next window");
      t.ok(Date.now() / 1000 < h.node0End, "asked within node 0's window");
    },
  );
}

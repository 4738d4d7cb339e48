import t from "tap";
import { closeAgents } from "../../harness/http-client.js";
import { hit, metric, startCluster, waitForRing } from "../../harness/cluster.js";
import { sleep } from "../../harness/wait.js";
import { LIBFAKETIME } from "../../harness/faketime.js";

// Issue 32, skewed hand-offs: node 0 fills a fixed window of a key, then hands it to node 1,
// whose clock is SKEW_S behind or ahead, so node 1's window ends while node 0's would still
// run. Invariant (algorithms/ages.ts fixedWindowFromAges): the handed-off count holds until
// node 0's window would have ended. Before, node 1 put it into its own current window and
// admitted the whole limit again when that ended: 2× the limit within node 0's window.

t.teardown(closeAgents);

const SKEW_S = 30;
const LIMIT = 20;
/** From the cluster's start: node 0's window lasts this long at least... */
const TEST_S = 60;
/** ...and node 1's ends within this range, after the hand-back. */
const BOUNDARY_S = [25, 45] as const;

for (const sign of [-1, 1]) {
  const direction = sign < 0 ? "behind" : "ahead";
  t.test(`a window filled on node 0, handed to node 1 ${SKEW_S} s ${direction}: nothing admitted again before node 0's window ends`, async (t) => {
    if (LIBFAKETIME === undefined) return t.plan(0, "libfaketime not installed (Debian: apt-get install -y libfaketime)");
    let start = Date.now() / 1000;
    let windowS: number | undefined;
    let boundary = 0;
    // A few starts in a thousand fit no length: try again a second later.
    for (let tries = 0; tries < 5 && windowS === undefined; tries++) {
      if (tries > 0) await sleep(1000);
      start = Date.now() / 1000;
      for (let d = 60; d <= 7200 && windowS === undefined; d++) {
        const toNode1End = d - ((((start + sign * SKEW_S) % d) + d) % d);
        if ((start % d) + TEST_S < d && toNode1End >= BOUNDARY_S[0] && toNode1End <= BOUNDARY_S[1]) {
          windowS = d;
          boundary = start + toNode1End;
        }
      }
    }
    if (windowS === undefined) throw new Error("no window length from 60 to 7200 s fits");
    const fw = { algorithm: "fixed-window", duration: windowS };
    const skewed = { LD_PRELOAD: LIBFAKETIME, FAKETIME: `${sign < 0 ? "-" : "+"}${SKEW_S}s`, FAKETIME_DONT_FAKE_MONOTONIC: "1" };
    const cluster = await startCluster(2, { LOG_LEVEL: "info" }, (i) => (i === 1 ? skewed : {}));
    t.teardown(() => cluster.stop());
    const a = cluster.nodes[0]!;
    const id = cluster.identifierOwnedBy(1, "skewed");

    // Node 1 away: node 0 decides the key and fills its window.
    cluster.nodes[1]!.signal("SIGTERM");
    await cluster.nodes[1]!.exited;
    let filled = 0;
    for (let i = 0; i < LIMIT + 5; i++) if ((await hit(a, id, LIMIT, fw)).json.data.allowed === true) filled++;
    t.equal(filled, LIMIT, "node 0 admits the limit in its window");

    // Node 1 back: node 0 hands the key to it before node 1's window ends.
    const back = await cluster.restart(1);
    await waitForRing([a, back], 2);
    while (Date.now() / 1000 < boundary - 1 && ((await metric(back, "ringlimit_stored_keys")) ?? 0) < 1) await sleep(50);
    t.equal(await metric(back, "ringlimit_stored_keys"), 1, "node 1 received the key");
    t.ok(Date.now() / 1000 < boundary - 1, "before node 1's window ends");
    const before = await hit(a, id, LIMIT, fw);
    t.notOk(before.json.data.degraded, "decided by node 1");
    t.not(before.json.data.allowed, true, "node 1 holds the count");

    // Past node 1's window end, within node 0's window: still full.
    await sleep(Math.max(0, (boundary + 1) * 1000 - Date.now()));
    let admitted = 0;
    for (let i = 0; i < LIMIT; i++) {
      const r = await hit(a, id, LIMIT, fw);
      if (r.json.data.allowed === true && !r.json.data.degraded) admitted++;
    }
    t.comment(`skew ${sign * SKEW_S} s: admitted undegraded after node 1's window ended: ${admitted} of ${LIMIT}`);
    t.equal(admitted, 0, "nothing admitted again within node 0's window");
    t.ok(Date.now() / 1000 - start < TEST_S, `the test ran within the ${TEST_S} s its window was chosen for`);
  });
}

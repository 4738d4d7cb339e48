import t from "tap";
import { closeAgents, post } from "../../harness/http-client.js";
import { hit, metric, startCluster, waitForRing } from "../../harness/cluster.js";
import { sleep } from "../../harness/wait.js";
import { LIBFAKETIME } from "../../harness/faketime.js";

// Issue 14, clocks: two real nodes whose wall clocks differ (libfaketime preloaded into one,
// as the fault suite does; no root needed), a key's state handed from the fast clock to the
// slow one on a leave and back on the rejoin. States cross as ages (docs/peer-protocol.md,
// "States on the wire"): the window count is kept and no refill is granted. With the
// sender's clock readings on the wire (protocol 3), the fixed window restarted at 1 both
// ways and the bucket got SKEW_S of refill on the way back.

t.teardown(closeAgents);

/** Node 1's clock is this far ahead. Forwarded answers stay within peer-data.ts CLOCK_SKEW_MS of the window reach. */
const SKEW_S = 50;
/** The test's length from the cluster's start, bounded: the window chosen below must hold for all of it. */
const TEST_S = 40;
const LIMIT = 20;
const BUCKET_S = 60;

t.test(`a node ${SKEW_S} s ahead hands a window and a bucket away and gets them back: nothing dropped, no refill granted`, async (t) => {
  if (LIBFAKETIME === undefined) return t.plan(0, "libfaketime not installed (Debian: apt-get install -y libfaketime)");
  // Windows are aligned to each node's clock: pick a window length for which node 1 is in
  // the next window for the whole test while node 0 is not, the case where clock readings
  // on the wire lost the count (the fault suite picks its window the same way).
  const start = Date.now() / 1000;
  let windowS: number | undefined;
  for (let d = 60; d <= 600 && windowS === undefined; d++) {
    const into = start % d;
    if (into >= d - SKEW_S + 1 && into + TEST_S < d) windowS = d;
  }
  if (windowS === undefined) throw new Error("no window length from 60 to 600 s fits");
  const fw = { algorithm: "fixed-window", duration: windowS };
  const tb = { algorithm: "token-bucket", duration: BUCKET_S };

  const skewed = { LD_PRELOAD: LIBFAKETIME, FAKETIME: `+${SKEW_S}s`, FAKETIME_DONT_FAKE_MONOTONIC: "1" };
  const cluster = await startCluster(2, { LOG_LEVEL: "info" }, (i) => (i === 1 ? skewed : {}));
  t.teardown(() => cluster.stop());
  const a = cluster.nodes[0]!;
  const fwId = cluster.identifierOwnedBy(1, "fw");
  const tbId = cluster.identifierOwnedBy(1, "tb");

  // 15 requests of each key through node 0, decided by their owner, node 1 (fast clock).
  const first = Date.now();
  let last = { fw: 0, tbRemaining: 0 };
  for (let i = 0; i < 15; i++) {
    const f = await hit(a, fwId, LIMIT, fw);
    const b = await hit(a, tbId, LIMIT, tb);
    t.notOk(f.json.data.degraded || b.json.data.degraded, "decided by the owner");
    last = { fw: f.json.data.count, tbRemaining: b.json.data.remaining };
  }
  t.equal(last.fw, 15, "node 1 counted 15 in its window");
  t.ok((await metric(a, "ringlimit_peer_clock_offset_seconds", `{peer="${cluster.members[1]}"}`))! > SKEW_S - 2, "node 0 measures node 1's clock ahead");
  // The owner's answers reach callers with reset times on the forwarding node's clock
  // (peer-data.ts resetTimeHere): node 1's window ends within one window of node 0's now,
  // not SKEW_S later; on node 1's clock it would be more than a window ahead.
  const peek = { namespace: "test", identifier: fwId, limit: LIMIT, ...fw, cost: 0 };
  const single = await hit(a, fwId, LIMIT, { ...fw, cost: 0 });
  const batch = await post(a.url, "/limit/batch", { requests: [peek, { ...peek, identifier: tbId, ...tb }] });
  for (const [name, resetTime, withinS] of [
    ["forwarded", single.json.data.reset_time, windowS],
    ["batch", batch.json.data.results[0].reset_time, windowS],
    ["batch, bucket", batch.json.data.results[1].reset_time, BUCKET_S],
  ] as const) {
    const ahead = resetTime - Date.now() / 1000;
    t.ok(ahead > 0 && ahead <= withinS + 1, `${name}: reset_time ${ahead.toFixed(1)} s ahead of node 0's clock (at most ${withinS} s)`);
  }

  /** Most a bucket of LIMIT per BUCKET_S can have left after `used` requests since `first`. */
  const bucketBound = (used: number) => LIMIT - used + Math.floor((LIMIT * (Date.now() - first)) / (BUCKET_S * 1000));

  // Away: node 1 leaves; its states go to node 0, whose clock is SKEW_S behind.
  cluster.nodes[1]!.signal("SIGTERM");
  await cluster.nodes[1]!.exited;
  t.match(cluster.nodes[1]!.output(), /"handedOver":2,"notHandedOver":0/, "node 1 handed both states over");
  const away = await hit(a, fwId, LIMIT, fw);
  t.equal(away.json.data.count, 16, "node 0 goes on from 15 in its own window");
  const awayTb = await hit(a, tbId, LIMIT, tb);
  t.ok(awayTb.json.data.remaining <= bucketBound(16), `bucket on node 0: ${awayTb.json.data.remaining} left`);

  // And back: node 1 rejoins with the same clock; node 0 hands it its keys.
  const back = await cluster.restart(1);
  await waitForRing([a, back], 2);
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline && ((await metric(back, "ringlimit_stored_keys")) ?? 0) < 2) await sleep(50);
  t.equal(await metric(back, "ringlimit_stored_keys"), 2, "node 1 received both states");
  const home = await hit(a, fwId, LIMIT, fw);
  t.notOk(home.json.data.degraded, "decided by node 1 again");
  t.equal(home.json.data.count, 17, "node 1 goes on from 16 in its own window");
  const homeTb = await hit(a, tbId, LIMIT, tb);
  t.ok(homeTb.json.data.remaining <= bucketBound(17), `no ${SKEW_S} s of refill granted: ${homeTb.json.data.remaining} left`);

  t.ok(Date.now() / 1000 - start < TEST_S, `the test ran within the ${TEST_S} s its window was chosen for`);
});

// Issue 22, item 9: during a flap, a node that decides a key it does not own must not count
// it from zero as if nothing had been counted. Three real nodes whose failure detectors
// disagree: n0 drops a hung owner (SIGSTOP) within a second, n1 and n2 would wait a minute.
// n0 then owns some of the hung owner's keys on its own ring (a takeover), and forwards
// the others to n2, whose ring still names the hung owner (strays). Neither knows what the
// owner counted: every request over the limit they let through must say `degraded`.
import t from "tap";
import type { Test } from "tap";
import { JOIN_FENCE_MS } from "../../../src/shard/cluster/movement/coordinator.js";
import { HashRing } from "../../../src/shard/ring/ring.js";
import { ringKeyOf } from "../../../src/shard/ring/state-key.js";
import { hit, metric, startCluster, waitForRing, type TestCluster } from "../../harness/cluster.js";
import { closeAgents, type Reply } from "../../harness/http-client.js";
import type { NodeProcess } from "../../harness/node-process.js";
import { eventually, sleep } from "../../harness/wait.js";

t.teardown(closeAgents);

const LIMIT = 5;
const AFTER = 10; // requests per key while the owner hangs
const YEAR = 31_536_000; // no window end and no refill worth a request during the test

/** An identifier owned by node `owner` on the full ring and by node `then` once `owner` is gone. */
function keyMovingTo(cluster: TestCluster, owner: number, then: number, prefix: string): string {
  const without = new HashRing(cluster.members.filter((_, i) => i !== owner));
  for (let i = 0; ; i++) {
    const id = `${prefix}-${i}`;
    if (cluster.ownerOf("test", id) === owner && without.owner(ringKeyOf("test", id)) === cluster.members[then]) return id;
  }
}

const ask = (node: NodeProcess, id: string, algorithm: string): Promise<Reply> => hit(node, id, LIMIT, { algorithm, duration: YEAR });

/** Allowed answers not flagged degraded, and degraded ones, among `replies`. */
function tally(replies: Reply[]) {
  return {
    exact: replies.filter((r) => r.status === 200 && r.json.data.degraded !== true).length,
    degraded: replies.filter((r) => r.status === 200 && r.json.data.degraded === true).length,
    blocked: replies.filter((r) => r.status === 429).length,
    other: replies.filter((r) => r.status !== 200 && r.status !== 429).map((r) => r.status),
  };
}

/** `LIMIT` requests through each of `via` in turn; the one over the limit is asked at `owner`, so no other node caches its block. */
async function useUp(t: Test, via: NodeProcess[], owner: NodeProcess, id: string, algorithm: string): Promise<void> {
  for (let i = 0; i < LIMIT; i++) {
    const r = await ask(via[i % via.length]!, id, algorithm);
    t.equal(r.status, 200, `setup ${id} ${algorithm}: request ${i + 1} allowed`);
    t.notOk(r.json.data.degraded, "setup request decided by the owner");
  }
  const over = await ask(owner, id, algorithm);
  t.equal(over.status, 429, `setup ${id} ${algorithm}: the limit is used up`);
}

/**
 * n0 drops the hung owner n1 within a second; n2 would wait a minute. `replicas`: 1, no copy
 * anywhere; 2, n0 holds a copy of each key it takes over (its successor on the ring).
 * Returns the answers n0 gave per key while n1 hung.
 */
async function flap(t: Test, replicas: number) {
  // The hold is long on n0 so that every request below falls inside it, whatever the load.
  const cluster = await startCluster(3, { REPLICAS: String(replicas), HEARTBEAT_INTERVAL_MS: "100" }, (i): Record<string, string> =>
    i === 0 ? { FAILURE_TIMEOUT_MS: "400", TAKEOVER_HOLD_MS: "600000" } : { FAILURE_TIMEOUT_MS: "60000" },
  );
  const formedAt = Date.now(); // every member had added every other by then
  t.teardown(async () => {
    cluster.nodes[1]?.signal("SIGCONT");
    await cluster.stop();
  });
  const [n0, n1, n2] = cluster.nodes as NodeProcess[];
  const keys = ["fixed-window", "token-bucket"].flatMap((algorithm) => [
    { kind: "taken over by n0", id: keyMovingTo(cluster, 1, 0, `takeover-${algorithm}`), algorithm },
    { kind: "moved to n2 on n0's ring", id: keyMovingTo(cluster, 1, 2, `moved-${algorithm}`), algorithm },
  ]);
  for (const k of keys) await useUp(t, [n0!, n1!, n2!], n1!, k.id, k.algorithm);
  if (replicas > 1)
    t.ok(await eventually(async () => (await metric(n1!, "ringlimit_replication_backlog_states")) === 0, 10_000), "the owner's counts are replicated");
  // Past the join fences of a fresh cluster (n2 refuses forwards for keys of a member it
  // added less than JOIN_FENCE_MS ago): a steady cluster, as in production.
  await sleep(Math.max(0, JOIN_FENCE_MS - (Date.now() - formedAt)));

  n1!.signal("SIGSTOP");
  await waitForRing([n0!], 2);
  t.equal(await metric(n2!, "ringlimit_ring_members"), 3, "n2 still sees the hung owner: the rings disagree");
  const answers = new Map<string, ReturnType<typeof tally>>();
  for (const k of keys) {
    const replies: Reply[] = [];
    for (let i = 0; i < AFTER; i++) replies.push(await ask(n0!, k.id, k.algorithm));
    const r = tally(replies);
    answers.set(`${k.kind} (${k.algorithm})`, r);
    t.same(r.other, [], `${k.kind} (${k.algorithm}): every answer 200 or 429`);
    t.comment(`${k.kind} (${k.algorithm}), limit ${LIMIT} used up: ${r.exact} allowed as exact, ${r.degraded} degraded, ${r.blocked} blocked`);
    t.equal(r.exact, 0, `${k.kind} (${k.algorithm}): nothing beyond the limit allowed without 'degraded'`);
  }

  n1!.signal("SIGCONT");
  await waitForRing([n0!, n1!, n2!], 3);
  // Back on one ring: the owner's count stands, so each key is still at its limit through every node.
  for (const k of keys) {
    const replies = await Promise.all([n0!, n1!, n2!].map((via) => ask(via, k.id, k.algorithm)));
    t.equal(
      tally(replies).exact,
      0,
      `${k.kind} (${k.algorithm}) after the owner resumed: blocked through n0, n1, n2 (${replies.map((x) => x.status).join(", ")})`,
    );
  }
  return answers;
}

t.test("a ring flap, no copies: keys decided away from their hung owner are over-admitted only by degraded answers", async (t) => {
  await flap(t, 1);
});

t.test("a ring flap with a copy: a block the copy holds still answers 429", async (t) => {
  const answers = await flap(t, 2);
  for (const [kind, r] of answers) if (kind.startsWith("taken over")) t.equal(r.blocked, AFTER, `${kind}: every request blocked, from the copy`);
});

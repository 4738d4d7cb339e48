/**
 * A charge with an id on the ring (docs/api.md, Charge ids; issue 29 item 6), real nodes over
 * real TCP. A forward that times out (the owner frozen with SIGSTOP past PEER_TIMEOUT_MS) is
 * answered 503 while the owner, once it runs again, counts the charge it read late: retried with
 * its id on any node, it is counted exactly once; retried without one, twice (what the id is
 * for). And across versions: a charge with an id is never sent to an owner whose link runs below
 * protocol 13 (503, not counted), while one without an id still is.
 */
import t, { type Test } from "tap";
import { AUTH_HEADER, closeAgents, limit, post, request, type Reply } from "../../harness/http-client.js";
import { startCluster, waitForRing, type TestCluster } from "../../harness/cluster.js";
import type { NodeProcess } from "../../harness/node-process.js";
import { until } from "../../harness/wait.js";
import { clearOfWindowEnd } from "../../harness/contract.js";
import { PROTOCOL_MIN, PROTOCOL_VERSION } from "../../../src/peer/wire/constants.js";

t.teardown(closeAgents);

const keyOf = (identifier: string) => ({ namespace: "test", identifier, limit: 1000, duration: 3600 });
const charge = (node: NodeProcess, body: Record<string, unknown>): Promise<Reply> => post(node.url, "/limit/charge", body);
/** What the key counts, asked of its owner with a peek (cost 0 counts nothing). */
const countOn = async (owner: NodeProcess, key: ReturnType<typeof keyOf>): Promise<number> =>
  key.limit - (await limit(owner.url, { ...key, cost: 0 })).json.data.remaining;

/** Freeze the owner, send `send()` (answered 503: the forward timed out), thaw it, and wait until it has counted `cost`. */
async function lostAnswer(
  t: Test,
  cluster: TestCluster,
  owner: number,
  key: ReturnType<typeof keyOf>,
  cost: number,
  send: () => Promise<Reply[]>,
): Promise<void> {
  const before = await countOn(cluster.nodes[owner]!, key);
  cluster.nodes[owner]!.signal("SIGSTOP");
  let replies: Reply[];
  try {
    replies = await send();
  } finally {
    cluster.nodes[owner]!.signal("SIGCONT");
  }
  for (const r of replies) t.equal(r.status, 503, "the forward timed out: 503, its answer lost");
  // The owner read the frame when it ran again, within the budget counted from that read: counted.
  await until("the thawed owner counted the charge it read late", async () => (await countOn(cluster.nodes[owner]!, key)) >= before + cost, 20_000);
}

t.test("a forward that timed out, retried with its id on any node, is counted exactly once", async (t) => {
  // The frozen owner stays on the ring (long FAILURE_TIMEOUT_MS): forwards to it time out after 300 ms.
  const cluster = await startCluster(3, { PEER_TIMEOUT_MS: "300", HEARTBEAT_INTERVAL_MS: "200", FAILURE_TIMEOUT_MS: "60000", TAKEOVER_HOLD_MS: "0" });
  t.teardown(() => cluster.stop());
  await clearOfWindowEnd(3600, 60_000);
  const [owner, a, b] = [0, 1, 2].map((i) => cluster.nodes[i]!);

  const key = keyOf(cluster.identifierOwnedBy(0, "cid"));
  await lostAnswer(t, cluster, 0, key, 40, async () => [await charge(a!, { ...key, cost: 40, charge_id: "lost-1" })]);
  const retry = await charge(b!, { ...key, cost: 40, charge_id: "lost-1" });
  t.equal(retry.status, 200, "the retry, through another member, reaches the owner");
  t.same([retry.json.data.duplicate, retry.json.data.count, retry.json.data.remaining], [true, 40, 960], "answered as the first: duplicate");
  const again = await charge(a!, { ...key, cost: 40, charge_id: "lost-1" });
  t.equal(again.json.data.duplicate, true, "and through the member that lost it");
  t.equal((await charge(owner!, { ...key, cost: 40, charge_id: "lost-1" })).json.data.duplicate, true, "and on the owner itself");
  t.equal(await countOn(owner!, key), 40, "counted exactly once");

  // Both members time out on the same id while the owner is frozen: it reads both frames, counts one.
  const both = keyOf(cluster.identifierOwnedBy(0, "cid-both"));
  await lostAnswer(t, cluster, 0, both, 25, () =>
    Promise.all([charge(a!, { ...both, cost: 25, charge_id: "twice" }), charge(b!, { ...both, cost: 25, charge_id: "twice" })]),
  );
  // Frames on one connection are decided in order: this answer comes after both members' lost ones.
  for (const m of [a!, b!]) t.equal((await charge(m, { ...both, cost: 25, charge_id: "twice" })).json.data.duplicate, true);
  t.equal(await countOn(owner!, both), 25, "two lost forwards of one id: counted once");

  // The same retry without an id counts again: what the id is for.
  const plain = keyOf(cluster.identifierOwnedBy(0, "plain"));
  await lostAnswer(t, cluster, 0, plain, 40, async () => [await charge(a!, { ...plain, cost: 40 })]);
  t.equal((await charge(b!, { ...plain, cost: 40 })).status, 200);
  t.equal(await countOn(owner!, plain), 80, "without an id, the retry is counted a second time");
});

t.test("version skew: a charge with an id is never forwarded on a link below 13 (503, not counted); one without still is", async (t) => {
  // Node 0 speaks 11..12 (PEER_PROTOCOL_MAX, as an older build would), node 1 up to 13.
  const cluster = await startCluster(2, {}, (i): Record<string, string> => (i === 0 ? { PEER_PROTOCOL_MAX: "12" } : {}));
  t.teardown(() => cluster.stop());
  await clearOfWindowEnd(3600, 60_000);
  const [old, current] = [cluster.nodes[0]!, cluster.nodes[1]!];
  const protocolOf = async (n: NodeProcess) => (await request(n.url + "/cluster", { headers: AUTH_HEADER })).json.data.protocol;
  await until("both run their ring at 12", async () => (await Promise.all([old, current].map(protocolOf))).every((p) => p?.ring === 12), 15_000);
  t.same(await protocolOf(current), { min: PROTOCOL_MIN, max: PROTOCOL_VERSION, ring: 12 }, "the current node speaks its own range, and runs at 12");
  const onOld = keyOf(cluster.identifierOwnedBy(0, "skew-old"));
  const onNew = keyOf(cluster.identifierOwnedBy(1, "skew-new"));

  const toOld = await charge(current, { ...onOld, cost: 9, charge_id: "skew-1" });
  t.equal(toOld.status, 503, "a member of 13 does not send an id to an owner of 12");
  t.equal(await countOn(old, onOld), 0, "and nothing was counted");
  const fromOld = await charge(old, { ...onNew, cost: 9, charge_id: "skew-2" });
  t.equal(fromOld.status, 503, "a member pinned at 12 sends no id either");
  t.equal(await countOn(current, onNew), 0);

  t.equal((await charge(current, { ...onOld, cost: 9 })).status, 200, "a charge without an id is forwarded at 12 as before");
  t.equal((await charge(old, { ...onNew, cost: 9 })).status, 200);
  t.equal(await countOn(old, onOld), 9);
  t.equal(await countOn(current, onNew), 9);

  // Decided by its owner, an id needs no link: counted once there.
  const local = await charge(old, { ...onOld, cost: 1, charge_id: "skew-3" });
  const local2 = await charge(old, { ...onOld, cost: 1, charge_id: "skew-3" });
  t.same([local.status, local.json.data.duplicate, local2.json.data.duplicate], [200, false, true]);
  t.equal(await countOn(old, onOld), 10);
});

t.test("the documented bound: ids do not travel with a hand-off, so a retry across one is counted again", async (t) => {
  const cluster = await startCluster(3);
  t.teardown(() => cluster.stop());
  await clearOfWindowEnd(3600, 60_000);
  const key = keyOf(cluster.identifierOwnedBy(0, "handoff"));
  const first = await charge(cluster.nodes[1]!, { ...key, cost: 40, charge_id: "moved" });
  t.same([first.status, first.json.data.duplicate], [200, false]);
  // The owner leaves gracefully (SIGTERM): its states, the key's count included, go to their new owners.
  cluster.nodes[0]!.signal("SIGTERM");
  await cluster.nodes[0]!.exited;
  const rest = [cluster.nodes[1]!, cluster.nodes[2]!];
  await waitForRing(rest, 2, 30_000);
  const heir = cluster.nodes[cluster.ownerOf("test", key.identifier, cluster.members.slice(1))]!;
  await until("the count was handed over", async () => (await countOn(heir, key)) === 40, 20_000);
  const retry = await charge(rest[0]!, { ...key, cost: 40, charge_id: "moved" });
  t.same([retry.status, retry.json.data.duplicate], [200, false], "the new owner never saw the id");
  t.equal(await countOn(heir, key), 80, "a retry that straddles an ownership change is counted again (docs/api.md, Charge ids)");
});

// "A decision whose answer never reached its caller is not counted": two real nodes, A
// forwarding to B (the owner) through a relay that holds each chunk, so a forwarded answer
// is still on its way when the caller is gone. A gives back on B what B counted for it.
import net from "node:net";
import t from "tap";
import { HashRing } from "../../../../src/shard/ring/ring.js";
import { ringKeyOf } from "../../../../src/shard/ring/state-key.js";
import { CLUSTER_SECRET, PATIENT_PEERS, hit, metric, waitForRing } from "../../../harness/cluster.js";
import { closeAgents } from "../../../harness/http-client.js";
import { spawnNode } from "../../../harness/node-process.js";
import { freePort } from "../../../harness/ports.js";
import { limitRequest, rawExchange } from "../../../harness/raw-http.js";
import { startRelay } from "../../../harness/relay.js";
import { eventually, sleep } from "../../../harness/wait.js";

t.teardown(closeAgents);

const LIMIT = 1000;
// Each way: the forward's answer reaches A 400 ms after it left, long after its caller left.
const LINK_DELAY_MS = 200;

const [portA, portB, peerA, peerB] = [await freePort(), await freePort(), await freePort(), await freePort()];
const relay = await startRelay(peerB);
t.teardown(() => relay.close());
const memberA = `127.0.0.1:${peerA}`;
const memberB = `127.0.0.1:${relay.port}`;
const common = { ...PATIENT_PEERS, PEER_HOST: "127.0.0.1", PEERS: `${memberA},${memberB}`, CLUSTER_SECRET, LOG_LEVEL: "warn" };
const [a, b] = await Promise.all([
  spawnNode({ ...common, PORT: String(portA), PEER_PORT: String(peerA) }),
  spawnNode({ ...common, PORT: String(portB), PEER_PORT: String(peerB), NODE_ID: memberB }),
]);
t.teardown(() => Promise.all([a.kill(), b.kill()]).then(() => undefined));
await waitForRing([a, b], 2);
relay.delayMs.toServer = relay.delayMs.toClient = LINK_DELAY_MS;

const ring = new HashRing([memberA, memberB]);
const run = Date.now().toString(36);
function ownedByB(prefix: string, n: number): string[] {
  const ids: string[] = [];
  for (let i = 0; ids.length < n; i++) if (ring.owner(ringKeyOf("test", `${prefix}-${run}-${i}`)) === memberB) ids.push(`${prefix}-${run}-${i}`);
  return ids;
}
/** B's own count of `id`: a peek asked of B, its owner */
const countAtB = async (id: string) => (await hit(b, id, LIMIT, { cost: 0 })).json.data.count as number;
const counts = (ids: string[]) => Promise.all(ids.map(countAtB));
const request = (id: string) => limitRequest({ namespace: "test", identifier: id, limit: LIMIT, duration: 3600 });
const givenBack = async () => (await metric(a, "ringlimit_forward_given_back_total")) ?? 0;
/**
 * Waits for the first 100 ms of a wall-clock second. The owner gives back only into a state born
 * no later than the second of the earliest moment the decision can have been counted (the
 * frame's departure, as the GIVE_BACK's age says): a second that turns while the forward crosses
 * the 200 ms link makes that ambiguous, and the owner then keeps the count (never give back what
 * a later state did not hold). These tests are about the unambiguous case, so each forward
 * leaves early in a second; a loaded machine still has ~700 ms of slack.
 */
async function earlyInSecond(): Promise<void> {
  const into = Date.now() % 1000;
  if (into >= 100) await sleep(1000 - into + 5);
}

t.test("a pipelining client cut off by uWebSockets.js: the forwarded decision it never saw is given back", async (t) => {
  const ids = ownedByB("pipelined", 20);
  const before = await givenBack();
  let answered = 0;
  for (const id of ids) {
    // Two requests in one write: the first is forwarded, and uWS closes the connection when it
    // parses the second while the first's answer is pending (docs/api.md, Pipelining).
    await earlyInSecond();
    const r = await rawExchange(portA, request(id) + request(id), { waitMs: 5_000 });
    t.ok(r.closedByServer, `${id}: the connection was closed`);
    answered += r.responses.length;
  }
  t.equal(answered, 0, "no answer reached the client");
  t.ok(await eventually(async () => (await givenBack()) - before === ids.length, 10_000), "A gave back each forwarded decision");
  // The GIVE_BACK calls cross the same slow link: B applies them a moment later.
  await eventually(async () => (await counts(ids)).every((c) => c === 0), 10_000);
  t.same(
    await counts(ids),
    ids.map(() => 0),
    "B's count holds none of them",
  );
});

t.test("a caller that closes its connection while its forward is on the way: not counted", async (t) => {
  const ids = ownedByB("left", 10);
  const before = await givenBack();
  for (const id of ids) {
    const socket = net.connect(portA, "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", resolve));
    await earlyInSecond();
    socket.write(request(id));
    await sleep(50);
    socket.destroy();
  }
  t.ok(await eventually(async () => (await givenBack()) - before === ids.length, 10_000), "A gave back each one");
  // The GIVE_BACK calls cross the same slow link: B applies them a moment later.
  await eventually(async () => (await counts(ids)).every((c) => c === 0), 10_000);
  t.same(
    await counts(ids),
    ids.map(() => 0),
    "B's count holds none of them",
  );
});

t.test("answers delivered stay counted, after and beside the ones given back", async (t) => {
  const [id] = ownedByB("delivered", 1);
  const before = await givenBack();
  for (let i = 1; i <= 3; i++) {
    const r = await hit(a, id!, LIMIT);
    t.equal(r.status, 200);
    t.equal(r.json.data.remaining, LIMIT - i, `answer ${i} delivered: remaining ${LIMIT - i}`);
  }
  // One more on a connection that is cut off: given back, while the three answered stay.
  await earlyInSecond();
  const cut = await rawExchange(portA, request(id!) + request(id!), { waitMs: 5_000 });
  t.equal(cut.responses.length, 0);
  t.ok(await eventually(async () => (await givenBack()) - before === 1, 10_000));
  await eventually(async () => (await countAtB(id!)) === 3, 10_000);
  t.equal(await countAtB(id!), 3, "B counts the three answers its caller received");
});

/**
 * Adding an algorithm is its file and a line in the registry (docs/architecture.md): here a
 * fifth one, registered in this test process only, is forwarded to its owner over the peer
 * channel and handed over on a leave between two real nodes (in this process, real TCP),
 * with nothing else changed. Its state layout is its own (the count in `c`, where the fixed
 * window keeps it in `b`), so the receiver must ask the algorithm, not guess from a code, to
 * accept it.
 */
import t from "tap";
import { ALGORITHMS, ALGORITHM_NAMES, type Algorithm, type LimitState } from "../../../src/algorithms/index.js";
import { checkWindowAges, windowFromAges, windowLeaving, windowToAges } from "../../../src/algorithms/ages.js";
import { fixedWindow } from "../../../src/algorithms/fixed-window.js";
import { registerForTest } from "../../../src/algorithms/registry.js";
import { loadConfig } from "../../../src/config.js";
import type { Decision, LimitQuery } from "../../../src/decision.js";
import { createLogger } from "../../../src/logger.js";
import { startNode, type RunningNode } from "../../../src/node.js";
import { HashRing } from "../../../src/shard/ring/ring.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { CLUSTER_SECRET } from "../../harness/cluster.js";
import { TEST_KEY } from "../../harness/http-client.js";
import { freePort } from "../../harness/ports.js";
import { eventually, until } from "../../harness/wait.js";

/** A fixed window that keeps its count in `c` and 0 in `b`. */
const swapped = (s: Readonly<LimitState>): LimitState => ({ a: s.a, b: s.c, c: s.b });
function swapInPlace(s: LimitState): void {
  const b = s.b;
  s.b = s.c;
  s.c = b;
}
const tally: Algorithm = {
  name: "test-tally",
  code: ALGORITHMS.length,
  step(state, limit, D, now, out, cost) {
    fixedWindow.step(state === null ? null : swapped(state), limit, D, now, out, cost);
    swapInPlace(out);
  },
  charge(state, limit, D, now, out, cost) {
    fixedWindow.charge(state === null ? null : swapped(state), limit, D, now, out, cost);
    swapInPlace(out);
  },
  merge(x, y, D, now, out) {
    fixedWindow.merge(swapped(x), swapped(y), D, now, out);
    swapInPlace(out);
  },
  mergeCopies(x, y, D, now, out) {
    fixedWindow.mergeCopies(swapped(x), swapped(y), D, now, out);
    swapInPlace(out);
  },
  refund(state, cost, countedAt, D, now, out) {
    fixedWindow.refund(swapped(state), cost, countedAt, D, now, out);
    swapInPlace(out);
  },
  expiresAt: (state, limit, D) => fixedWindow.expiresAt(swapped(state), limit, D),
  leaving: windowLeaving,
  toAges: windowToAges,
  fromAges: windowFromAges,
  checkAged(aged, D, bounds) {
    if (aged.b !== 0) return "invalid";
    swapInPlace(aged);
    const verdict = checkWindowAges(aged, 1, D, bounds);
    swapInPlace(aged);
    return verdict;
  },
};

const offered = [...ALGORITHM_NAMES];
registerForTest(tally);

t.test("the registry takes one more at the next code, refuses a taken code or name, and offers callers only the shipped ones", async (t) => {
  t.equal(ALGORITHMS[tally.code], tally);
  t.same(ALGORITHM_NAMES, offered, "not a name a request may carry");
  t.throws(() => registerForTest({ ...tally, name: "test-other" }), RangeError, "a code taken");
  t.throws(() => registerForTest({ ...tally, code: ALGORITHMS.length }), RangeError, "a name taken");
});

async function startPair(): Promise<{ nodes: RunningNode[]; members: string[] }> {
  const peerPorts = [await freePort(), await freePort()];
  const members = peerPorts.map((p) => `127.0.0.1:${p}`);
  const nodes = await Promise.all(
    peerPorts.map((peerPort) =>
      startNode(
        loadConfig({
          HOST: "127.0.0.1",
          PORT: "0",
          API_KEYS: TEST_KEY,
          PEER_HOST: "127.0.0.1",
          PEER_PORT: String(peerPort),
          PEERS: members.join(","),
          CLUSTER_SECRET,
          REPLICAS: "1",
          // Exact counts are asserted: no forward may fail open on a loaded machine.
          PEER_TIMEOUT_MS: "10000",
          DRAIN_TIMEOUT_MS: "10000",
          LOG_LEVEL: "silent",
        }),
        createLogger("silent"),
      ),
    ),
  );
  await until("both nodes ready", () => nodes.every((n) => n.cluster!.ready), 20_000);
  return { nodes, members };
}

function decide(node: RunningNode, query: LimitQuery): Promise<Decision> {
  return new Promise((resolve) => node.cluster!.decider.decide(query, Date.now(), (d) => (resolve({ ...d }), true)));
}

t.test("two real nodes: its decisions are forwarded to the owner, and its states handed over on a leave", async (t) => {
  const { nodes, members } = await startPair();
  const [a, b] = nodes as [RunningNode, RunningNode];
  t.teardown(() => Promise.all(nodes.map((n) => n.stop())));
  const ring = new HashRing(members);
  const ownedBy = (index: number, prefix: string) => {
    for (let i = 0; ; i++) if (ring.owner(ringKeyOf("fifth", `${prefix}-${i}`)) === members[index]) return `${prefix}-${i}`;
  };
  const query = (identifier: string): LimitQuery => ({ namespace: "fifth", identifier, limit: 5, duration: 3600, algorithm: tally, cost: 1 });
  const stateKey = (identifier: string) => stateKeyOf(tally.code, 3600, ringKeyOf("fifth", identifier));

  // Forwarded: the peer channel carries the code, the owner resolves it in the registry.
  const remote = ownedBy(1, "remote");
  const answers = [];
  for (let i = 0; i < 3; i++) answers.push(await decide(a, query(remote)));
  t.same(
    answers.map((d) => [d.allowed, d.remaining, d.degraded]),
    [
      [true, 4, null],
      [true, 3, null],
      [true, 2, null],
    ],
    "decided by the owner, one count",
  );
  t.equal(a.table.get(stateKey(remote)), undefined, "nothing kept on the forwarding node");
  t.match(b.table.get(stateKey(remote)), { b: 0, c: 3 }, "the owner keeps the state in the algorithm's own layout");

  // Handed over: A's states go to B when A leaves, checked by the algorithm's own rule.
  const local = [ownedBy(0, "local"), ownedBy(0, "other")];
  for (const id of local) for (let i = 0; i < 2; i++) t.equal((await decide(a, query(id))).degraded, null);
  for (const id of local) t.match(a.table.get(stateKey(id)), { b: 0, c: 2 });
  await a.stop();
  t.ok(await eventually(() => local.every((id) => b.table.get(stateKey(id))?.c === 2), 10_000), "both states arrived with their counts");
  const after = await decide(b, query(local[0]!));
  t.same([after.allowed, after.remaining, after.degraded], [true, 2, null], "the new owner goes on counting: 2 handed over + 1 of 5");
});

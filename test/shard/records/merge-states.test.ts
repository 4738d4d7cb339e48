import t from "tap";
import { ALGORITHMS, newStep } from "../../../src/algorithms/index.js";
import { mergeState, storeReplica } from "../../../src/shard/records/merge-states.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { StateTable, type StoredState } from "../../../src/shard/table/state-table.js";
import { prng } from "../../harness/prng.js";

const T0 = 1_800_000_000_000;
const D = 3_600_000;
const LIMIT = 50;

/** How many more requests `table` admits for `key` at `now` (on a throwaway copy). */
function admits(state: StoredState | undefined, key: string, algIndex: number, now: number): number {
  const table = new StateTable(10, T0);
  if (state !== undefined) table.set(key, state);
  const out = newStep();
  let n = 0;
  for (; n <= LIMIT; n++) {
    table.decide(key, ALGORITHMS[algIndex]!, LIMIT, D, now, out);
    if (!out.allowed) break;
  }
  return n;
}

for (const [i, alg] of ALGORITHMS.entries()) {
  t.test(`${alg.name}: a copy of a state, applied any number of times in any order, counts nothing twice`, async (t) => {
    const key = stateKeyOf(alg.code, D / 1000, ringKeyOf("ns", "copied"));
    const owner = new StateTable(10, T0);
    const out = newStep();
    const copies: StoredState[] = [];
    // The owner counts 30 requests; a copy is taken after every 5 (what replicas and snapshots hold).
    for (let n = 1; n <= 30; n++) {
      owner.decide(key, alg, LIMIT, D, T0 + n * 10, out);
      if (n % 5 === 0) copies.push(owner.get(key)!);
    }
    const now = T0 + 1000;
    const expected = admits(owner.get(key), key, i, now);
    t.equal(expected, LIMIT - 30, "the owner alone admits the rest of the limit");

    const rnd = prng(7 + i);
    const receiver = new StateTable(10, T0);
    for (let round = 0; round < 40; round++) t.ok(mergeState(receiver, key, copies[Math.floor(rnd() * copies.length)]!, now));
    for (const c of copies) mergeState(receiver, key, c, now);
    t.equal(admits(receiver.get(key), key, i, now), expected, "every copy merged, repeatedly and shuffled: the newest copy's count, not a sum");

    const stale = new StateTable(10, T0);
    stale.set(key, owner.get(key)!);
    mergeState(stale, key, copies[0]!, now);
    t.equal(admits(stale.get(key), key, i, now), expected, "a stale copy arriving at the newer state changes nothing (no resurrection)");
  });

  t.test(`${alg.name}: states of different origins counted different requests and add up`, async (t) => {
    const key = stateKeyOf(alg.code, D / 1000, ringKeyOf("ns", "disjoint"));
    const x = new StateTable(10, T0);
    const y = new StateTable(10, T0);
    const out = newStep();
    for (let n = 0; n < 12; n++) x.decide(key, alg, LIMIT, D, T0 + n, out);
    for (let n = 0; n < 7; n++) y.decide(key, alg, LIMIT, D, T0 + n, out);
    t.not(x.get(key)!.origin, y.get(key)!.origin, "each table drew its own origin");
    mergeState(y, key, x.get(key)!, T0 + 100);
    t.equal(admits(y.get(key), key, i, T0 + 100), LIMIT - 19, "12 + 7 counted");
    t.equal(y.get(key)!.origin !== x.get(key)!.origin, true, "the receiver keeps its own origin");
  });
}

t.test("expired records are not merged", async (t) => {
  const table = new StateTable(10, T0);
  const key = stateKeyOf(0, 60, ringKeyOf("ns", "old"));
  t.notOk(mergeState(table, key, { a: T0 - 120_000, b: 3, c: 0, expiresAt: Math.ceil((T0 - 60_000) / 1000), origin: 9, born: 0 }, T0));
  t.equal(table.size, 0);
});

for (const [i, alg] of ALGORITHMS.entries()) {
  if (alg.name === "concurrency") continue;
  t.test(`${alg.name}: a replica takes its owner's refund; from another member it keeps the further advanced copy`, async (t) => {
    const key = stateKeyOf(alg.code, D / 1000, ringKeyOf("ns", "refunded"));
    const owner = new StateTable(10, T0);
    const out = newStep();
    owner.decide(key, alg, LIMIT, D, T0, out, 80, true); // 30 past the limit: debt
    const inDebt = owner.get(key)!;
    owner.decide(key, alg, LIMIT, D, T0 + 10, out, -60, true); // paid back: 20 counted
    const refunded = owner.get(key)!;
    t.equal(refunded.origin, inDebt.origin, "one history: the refund keeps the origin");
    const now = T0 + 20;
    const expected = admits(refunded, key, i, now);
    t.equal(expected, LIMIT - 20, "the owner admits what the refund gave back");

    const replica = new StateTable(10, T0);
    storeReplica(replica, key, inDebt, now, true);
    storeReplica(replica, key, refunded, now, true);
    t.equal(admits(replica.get(key), key, i, now), expected, "from the owner: the copy is the owner's state, the refund included");
    storeReplica(replica, key, inDebt, now, false);
    t.equal(admits(replica.get(key), key, i, now), 0, "from a member that is not the owner here: the further advanced copy is kept");
  });
}

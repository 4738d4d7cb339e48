// A count past the limit (debt: POST /limit/charge) read back from a snapshot or from a peer's
// record: held whole within what a charge can reach, clamped where a charge saturates
// (MAX_COUNT for a window, one bucket owed, two buckets held), never refused as out of bounds.
import t from "tap";
import { ALGORITHMS, MAX_COUNT, newStep, type Algorithm } from "../../../src/algorithms/index.js";
import { admitSnapshotState } from "../../../src/shard/records/state-check.js";
import { admitState } from "../../../src/shard/cluster/wire/peer-data.js";
import { decodeStates, encodeStates } from "../../../src/shard/records/state-records.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { StateTable, type StoredState } from "../../../src/shard/table/state-table.js";

const NOW = 1_800_000_123_456;
const DURATION_S = 86_400;
const D = DURATION_S * 1000;
const LIMIT = 1000;
const debtAlgorithms = ALGORITHMS.filter((a) => a.name !== "concurrency");
const keyOf = (alg: Algorithm) => stateKeyOf(alg.code, DURATION_S, ringKeyOf("ns", `debt-${alg.name}`));

/** The state a charge of `cost` leaves on a fresh key at NOW, as the table stores it. */
function charged(alg: Algorithm, cost: number): StoredState {
  const table = new StateTable(10, NOW);
  table.decide(keyOf(alg), alg, LIMIT, D, NOW, newStep(), cost, true);
  return table.get(keyOf(alg))!;
}

/** What a state counts at `now`: a charge's `used` after a refund of nothing (the smallest charge there is, 1, less 1). */
function used(alg: Algorithm, state: StoredState, now: number): number {
  const out = newStep();
  alg.charge(state, LIMIT, D, now, out, 1);
  return out.used - 1;
}

for (const alg of debtAlgorithms) {
  t.test(`${alg.name}: debt read back from a snapshot and from a peer's record counts what was charged`, async (t) => {
    const state = charged(alg, 5_000_000);
    const owed = used(alg, state, NOW);
    t.ok(owed > LIMIT, `charged past the limit: ${owed}`);
    const later = NOW + 1500;
    const fromSnapshot = admitSnapshotState(keyOf(alg), state, later);
    t.type(fromSnapshot, "object", "a snapshot's record in debt is admitted");
    t.equal(used(alg, fromSnapshot as StoredState, later), used(alg, state, later), "the snapshot holds the debt whole");
    const [record] = decodeStates(encodeStates([{ key: keyOf(alg), state }], later));
    const fromPeer = admitState(keyOf(alg), record!.state, later + 20);
    t.type(fromPeer, "object", "a peer's record in debt is admitted");
    t.equal(used(alg, fromPeer as StoredState, later + 20), used(alg, state, later + 20), "the peer channel carries the debt whole");
  });
}

t.test("a count beyond what a charge can reach is clamped where a charge saturates it, from a snapshot as from a peer", async (t) => {
  const [fixed, sliding, token, leaky] = debtAlgorithms as [Algorithm, Algorithm, Algorithm, Algorithm];
  // A charge saturates a window's count at MAX_COUNT.
  const near = { ...charged(fixed, 1), b: MAX_COUNT - 5 };
  const out = newStep();
  fixed.charge(near, LIMIT, D, NOW, out, 1_000_000_000);
  t.equal(out.b, MAX_COUNT, "a charge saturates a window's count at MAX_COUNT");
  const cases: Array<[string, Algorithm, Partial<StoredState>, (s: StoredState) => number, number]> = [
    ["fixed window: a count of 1e18", fixed, { b: 1e18 }, (s) => s.b, MAX_COUNT],
    ["fixed window: MAX_COUNT itself", fixed, { b: MAX_COUNT }, (s) => s.b, MAX_COUNT],
    ["sliding window: a previous count of 1e18", sliding, { c: 1e18 }, (s) => s.c, MAX_COUNT],
    ["token bucket: five buckets owed", token, { a: -5 * LIMIT * D }, (s) => s.a, -LIMIT * D],
    ["leaky bucket: ten buckets held", leaky, { a: 10 * LIMIT * D }, (s) => s.a, 2 * LIMIT * D],
  ];
  for (const [name, alg, forged, read, expected] of cases) {
    const state = { ...charged(alg, 1500), ...forged };
    const fromSnapshot = admitSnapshotState(keyOf(alg), state, NOW + 10);
    t.type(fromSnapshot, "object", `${name}: admitted from a snapshot`);
    t.equal(read(fromSnapshot as StoredState), expected, `${name}: clamped from a snapshot`);
    const [record] = decodeStates(encodeStates([{ key: keyOf(alg), state }], NOW + 10));
    const fromPeer = admitState(keyOf(alg), record!.state, NOW + 10);
    t.type(fromPeer, "object", `${name}: admitted from a peer`);
    t.equal(read(fromPeer as StoredState), expected, `${name}: clamped from a peer`);
  }
});

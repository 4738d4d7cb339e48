import t from "tap";
import { ALGORITHMS, newStep } from "../../../src/algorithms/index.js";
import { decodeStates, encodeStates, mergeStates } from "../../../src/shard/cluster/handoff.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/table/state-key.js";
import { StateTable } from "../../../src/shard/table/state-table.js";

const T0 = 1_800_000_000_000;

t.test("state records round-trip, non-ASCII keys included", async (t) => {
  const records = [
    { key: stateKeyOf(2, 60, ringKeyOf("ns.prodé", "用户-1")), state: { a: -12.5e9, b: T0, c: 7, expiresAt: 1_800_000_060, origin: 0xfeedbeef } },
    { key: stateKeyOf(0, 1, ringKeyOf("n", "x".repeat(512))), state: { a: T0, b: 3, c: 0, expiresAt: 4_000_000_000, origin: 1 } },
  ];
  t.same(decodeStates(encodeStates(records)), records);
  t.same(decodeStates(Buffer.alloc(0)), []);
});

t.test("a batch that cannot be split into records is refused whole; a key that is not UTF-8 decodes to an invalid one", async (t) => {
  const good = encodeStates([{ key: stateKeyOf(0, 60, ringKeyOf("n", "i")), state: { a: 1, b: 2, c: 0, expiresAt: 3, origin: 7 } }]);
  t.throws(() => decodeStates(good.subarray(0, good.length - 1)), RangeError);
  t.throws(() => decodeStates(Buffer.concat([good, Buffer.from([0, 5, 1])])), RangeError);
  const notUtf8 = Buffer.from(good);
  notUtf8[2 + 4] = 0xff; // inside the key
  t.equal(decodeStates(notUtf8)[0]!.key, "", "refused later, by checkState, record by record");
});

// Two nodes counted disjoint requests for one key (the key moved between them);
// after the merge the receiver must admit exactly what one node that saw all of them would.
for (const alg of ALGORITHMS) {
  t.test(`${alg.name}: merging handed-over state forgets nothing and counts nothing twice`, async (t) => {
    const D = 3_600_000;
    const key = stateKeyOf(alg.code, D / 1000, ringKeyOf("ns", "moving"));
    const sender = new StateTable(100, T0);
    const receiver = new StateTable(100, T0);
    const reference = new StateTable(100, T0);
    const out = newStep();
    for (let i = 0; i < 6; i++) {
      sender.decide(key, alg, 20, D, T0 + i, out);
      reference.decide(key, alg, 20, D, T0 + i, out);
    }
    for (let i = 0; i < 5; i++) {
      receiver.decide(key, alg, 20, D, T0 + 10 + i, out);
      reference.decide(key, alg, 20, D, T0 + 10 + i, out);
    }
    const records = decodeStates(encodeStates([{ key, state: sender.get(key)! }]));
    t.equal(mergeStates(receiver, records, T0 + 20), 1);
    let allowedAfter = 0;
    let allowedReference = 0;
    for (let i = 0; i < 30; i++) {
      receiver.decide(key, alg, 20, D, T0 + 20, out);
      allowedAfter += out.allowed ? 1 : 0;
      reference.decide(key, alg, 20, D, T0 + 20, out);
      allowedReference += out.allowed ? 1 : 0;
    }
    t.equal(allowedReference, 9, "one node seeing all 11 requests admits 9 more");
    t.equal(allowedAfter, allowedReference, "the merged state admits exactly the same");
    t.ok(receiver.get(key)!.expiresAt >= Math.ceil((T0 + 20) / 1000), "expiry kept");
  });
}

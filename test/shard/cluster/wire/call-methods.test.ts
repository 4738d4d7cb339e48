import t from "tap";
import { ALGORITHMS, newStep } from "../../../../src/algorithms/index.js";
import { decodeStates, encodeStates, mergeStates } from "../../../../src/shard/cluster/wire/call-methods.js";
import { ringKeyOf, stateKeyOf } from "../../../../src/shard/ring/state-key.js";
import { StateTable, type StoredState } from "../../../../src/shard/table/state-table.js";
import { admitState } from "../../../../src/shard/cluster/wire/peer-data.js";

const T0 = 1_800_000_000_000;

t.test("state records round-trip, non-ASCII keys included; times (expiry, birth) travel as ages at the send", async (t) => {
  const records = [
    {
      key: stateKeyOf(2, 60, ringKeyOf("ns.prodé", "用户-1")),
      state: { a: -12.5e9, b: T0 - 1500, c: 7, expiresAt: 1_800_000_060, origin: 0xfeedbeef, born: 1_799_999_990 },
    },
    { key: stateKeyOf(0, 1, ringKeyOf("n", "x".repeat(512))), state: { a: T0, b: 3, c: 0, expiresAt: 1_800_000_001, origin: 1, born: 1_800_000_000 } },
  ];
  t.same(decodeStates(encodeStates(records, T0 + 250)), [
    { key: records[0]!.key, state: { a: -12.5e9, b: 1750, c: 7, expiresInS: 60, origin: 0xfeedbeef, bornAgoS: 10 } },
    { key: records[1]!.key, state: { a: 250, b: 3, c: 0, expiresInS: 1, origin: 1, bornAgoS: 0 } },
  ]);
  t.same(decodeStates(Buffer.alloc(0)), []);
});

t.test("a batch that cannot be split into records is refused whole; a key that is not UTF-8 decodes to an invalid one", async (t) => {
  const good = encodeStates([{ key: stateKeyOf(0, 60, ringKeyOf("n", "i")), state: { a: T0, b: 2, c: 0, expiresAt: 3, origin: 7, born: 0 } }], T0);
  t.throws(() => decodeStates(good.subarray(0, good.length - 1)), RangeError);
  t.throws(() => decodeStates(Buffer.concat([good, Buffer.from([0, 5, 1])])), RangeError);
  const notUtf8 = Buffer.from(good);
  notUtf8[2 + 4] = 0xff; // inside the key
  t.equal(decodeStates(notUtf8)[0]!.key, "", "refused later, by checkState, record by record");
});

// Issue 14, clocks: a state handed over between two nodes whose clocks differ (by up to
// 5 min either way, at any point of a window) keeps what it counted: the receiver goes on
// exactly where the sender would have (buckets), or in its own current window with the
// sender's count (windows, which each node aligns to its own clock).
for (const alg of ALGORITHMS) {
  t.test(`${alg.name}: handed over between skewed clocks, nothing is dropped and no refill is granted`, async (t) => {
    const D = 60_000;
    const WIRE_MS = 3;
    const key = stateKeyOf(alg.code, D / 1000, ringKeyOf("ns", "skewed"));
    const out = newStep();
    for (const skew of [-300_000, -30_000, -1, 1, 30_000, 300_000]) {
      for (const phase of [1000, 29_000, 59_000]) {
        const sentAt = T0 + phase; // on the sender's clock; the receiver's reads sentAt + skew
        const sender = new StateTable(10, sentAt);
        for (let i = 0; i < 15; i++) sender.decide(key, alg, 20, D, sentAt - 500, out);
        const payload = encodeStates([{ key, state: sender.get(key)! }], sentAt);
        const receivedAt = sentAt + skew + WIRE_MS;
        const receiver = new StateTable(10, receivedAt);
        const admitted = decodeStates(payload).map(({ key, state }) => ({ key, state: admitState(key, state, receivedAt) as StoredState }));
        t.equal(mergeStates(receiver, admitted, receivedAt), 1);
        const state = receiver.get(key)!;
        const D2 = alg.code === 1 ? 2 * D : D;
        if (alg.code < 2) t.ok(state.expiresAt * 1000 >= receivedAt - (receivedAt % D) + D2, "kept at least to the end of this node's window");

        // The same instants on both clocks: the receiver answers as the sender would have.
        const name = `skew ${skew} ms, ${phase} ms into the sender's window`;
        sender.decide(key, alg, 20, D, sentAt + WIRE_MS, out);
        const there = { ...out };
        receiver.decide(key, alg, 20, D, receivedAt, out);
        t.equal(out.remaining, there.remaining, `${name}: remaining`);
        // The time on the wire is not seen: the level reads that much younger, full again that much later.
        if (alg.name === "concurrency") {
          // Lapse buckets are aligned to each node's clock: held slots lapse at the edge nearest the sender's lapse (buckets of 15 s).
          const late = out.resetMs - skew - there.resetMs;
          t.ok(Math.abs(late) <= 7_500 + 1000, `${name}: held slots lapse ${late} ms from the sender's lapse`);
        } else if (alg.code >= 2)
          t.equal(out.resetMs - skew, there.resetMs + WIRE_MS, `${name}: the bucket is full again at the same instant (+ the wire's ${WIRE_MS} ms)`);
      }
    }
  });
}

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
    const records = decodeStates(encodeStates([{ key, state: sender.get(key)! }], T0 + 20)).map(({ key, state }) => ({
      key,
      state: admitState(key, state, T0 + 20) as StoredState,
    }));
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

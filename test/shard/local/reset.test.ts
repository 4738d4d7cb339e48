/**
 * Reset in the table: what is removed, found through the identifier index whatever the
 * table has seen, and that a state of a reset identifier handed over afterwards is not
 * merged back unless it was born after the reset.
 */
import t from "tap";
import { ALGORITHMS } from "../../../src/algorithms/index.js";
import { mergeStates } from "../../../src/shard/cluster/wire/call-methods.js";
import { LocalDecider } from "../../../src/shard/local/local-decider.js";
import { resetOn } from "../../../src/shard/local/reset.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { RESET_MEMORY_MS, StateTable } from "../../../src/shard/table/state-table.js";

const T0 = 1_800_000_000_000;
const q = (identifier: string, duration: number, alg = 0) => ({ namespace: "ns", identifier, limit: 5, duration, algorithm: ALGORITHMS[alg]!, cost: 1 });

t.test("removes every state of one identifier", async (t) => {
  const table = new StateTable(1000, T0);
  const d = new LocalDecider(table);
  for (const [dur, alg] of [
    [60, 0],
    [3600, 0],
    [60, 2],
  ] as const)
    d.decideSync(q("u", dur, alg), T0);
  d.decideSync(q("other", 60), T0);
  const removed = resetOn(table, ringKeyOf("ns", "u"), undefined, undefined, T0);
  t.same(removed.map((r) => `${r.algorithm}/${r.duration}`).sort(), ["fixed-window/3600", "fixed-window/60", "token-bucket/60"]);
  t.equal(table.size, 1, "the other identifier stays");
});

t.test("one algorithm, one duration, or both: only the matching states go", async (t) => {
  const table = new StateTable(1000, T0);
  const d = new LocalDecider(table);
  for (const [dur, alg] of [
    [60, 0],
    [3600, 0],
    [60, 2],
    [3600, 2],
  ] as const)
    d.decideSync(q("u", dur, alg), T0);
  const u = ringKeyOf("ns", "u");
  t.same(resetOn(table, u, undefined, 60, T0), [
    { algorithm: "fixed-window", duration: 60 },
    { algorithm: "token-bucket", duration: 60 },
  ]);
  t.same(resetOn(table, u, ALGORITHMS[2], 3600, T0), [{ algorithm: "token-bucket", duration: 3600 }]);
  t.same(resetOn(table, u, ALGORITHMS[2], undefined, T0), [], "nothing of token-bucket left");
  t.same(resetOn(table, u, ALGORITHMS[0], undefined, T0), [{ algorithm: "fixed-window", duration: 3600 }]);
  t.equal(table.size, 0);
});

t.test("thousands of distinct durations and identifiers sharing a prefix or a suffix: the index finds exactly the identifier's states", async (t) => {
  const table = new StateTable(20_000, T0);
  const d = new LocalDecider(table);
  for (let dur = 1; dur <= 4200; dur++) d.decideSync(q(`x${dur}`, dur), T0);
  for (let dur = 1; dur <= 3000; dur++) d.decideSync(q("many", dur, dur % 4), T0);
  // "u" is a suffix of the ring key of "uu" and of namespace "nsu"'s "u"... and the ring key "2:nsu" ends in it too.
  d.decideSync(q("u", 7), T0);
  d.decideSync(q("u", 4100, 1), T0);
  d.decideSync(q("uu", 7), T0);
  d.decideSync({ ...q("u", 7), namespace: "nsu" }, T0);
  d.decideSync({ ...q("su", 7), namespace: "n" }, T0);
  t.equal(table.checkInvariants(), undefined);
  const removed = resetOn(table, ringKeyOf("ns", "u"), undefined, undefined, T0);
  t.same(
    removed.map((r) => `${r.algorithm}/${r.duration}`),
    ["fixed-window/7", "sliding-window/4100"],
  );
  t.equal(resetOn(table, ringKeyOf("ns", "many"), undefined, undefined, T0).length, 3000);
  t.equal(table.size, 4200 + 3, "the others stay");
  t.equal(table.checkInvariants(), undefined);
});

t.test("the index follows slots as they expire, are evicted and move, and as the table grows", async (t) => {
  const table = new StateTable(3000, T0);
  const d = new LocalDecider(table);
  for (let i = 0; i < 6000; i++) d.decideSync(q(`id${i % 500}`, 1 + (i % 40)), T0 + i); // evictions past 3,000
  d.decideSync(q("short", 1), T0);
  table.sweep(T0 + 3000);
  t.equal(table.checkInvariants(), undefined);
  for (let i = 0; i < 500; i++) resetOn(table, ringKeyOf("ns", `id${i}`), undefined, undefined, T0 + 3000);
  t.equal(table.size, 0, "every remaining state found by its identifier");
});

t.test("a state handed over after a reset is not merged back, until the reset is forgotten", async (t) => {
  const table = new StateTable(1000, T0);
  const key = stateKeyOf(0, 60, ringKeyOf("ns", "u"));
  const handed = { key, state: { a: T0 - (T0 % 60_000), b: 4, c: 0, expiresAt: Math.ceil(T0 / 1000) + 60, origin: 7, born: 0 } };
  resetOn(table, ringKeyOf("ns", "u"), undefined, undefined, T0);
  mergeStates(table, [handed], T0 + 1000);
  t.equal(table.get(key), undefined, "dropped: counted before the reset");
  const other = { ...handed, key: stateKeyOf(0, 60, ringKeyOf("ns", "v")) };
  mergeStates(table, [other], T0 + 1000);
  t.ok(table.get(other.key), "another identifier merges as before");
  table.sweep(T0 + RESET_MEMORY_MS + 1000);
  mergeStates(
    table,
    [
      {
        ...handed,
        state: {
          ...handed.state,
          a: T0 + RESET_MEMORY_MS + 1000 - ((T0 + RESET_MEMORY_MS + 1000) % 60_000),
          expiresAt: Math.ceil((T0 + RESET_MEMORY_MS) / 1000) + 120,
        },
      },
    ],
    T0 + RESET_MEMORY_MS + 1000,
  );
  t.ok(table.get(key), "after RESET_MEMORY_MS the identifier's states merge again");
});

t.test("a state begun after the reset is merged whole: only what was counted before it is dropped", async (t) => {
  const table = new StateTable(1000, T0);
  const ringKey = ringKeyOf("ns", "u");
  const key = stateKeyOf(0, 60, ringKey);
  const R = T0 + 300; // the reset, 300 ms into second T0/1000
  resetOn(table, ringKey, undefined, undefined, R);
  const state = (born: number) => ({ a: T0 - (T0 % 60_000), b: 10, c: 0, expiresAt: Math.ceil(T0 / 1000) + 60, origin: 7, born });
  mergeStates(table, [{ key, state: state(T0 / 1000 - 1) }], R + 1000);
  t.equal(table.get(key), undefined, "begun in a second before the reset's: dropped");
  mergeStates(table, [{ key, state: state(T0 / 1000) }], R + 1000);
  t.equal(table.get(key)?.b, 10, "begun in the reset's own second (maybe after it): kept, all 10 requests");
  table.delete(key);
  mergeStates(table, [{ key, state: state(T0 / 1000 + 5) }], R + 6000);
  t.equal(table.get(key)?.b, 10, "begun after the reset: kept");
  t.equal(table.get(key)?.born, T0 / 1000 + 5, "with its birth");
});

t.test("merging two histories keeps the later birth", async (t) => {
  const table = new StateTable(1000, T0);
  const key = stateKeyOf(0, 60, ringKeyOf("ns", "m"));
  const at = (born: number, origin: number) => ({ a: T0 - (T0 % 60_000), b: 2, c: 0, expiresAt: Math.ceil(T0 / 1000) + 60, origin, born });
  mergeStates(table, [{ key, state: at(T0 / 1000 - 30, 1) }], T0);
  mergeStates(table, [{ key, state: at(T0 / 1000 - 10, 2) }], T0);
  t.equal(table.get(key)?.b, 4, "disjoint histories add up");
  t.equal(table.get(key)?.born, T0 / 1000 - 10);
});

t.test("a reset lists the removed keys as changes (replication sends their removal); a plain delete does not", async (t) => {
  const table = new StateTable(1000, T0);
  const d = new LocalDecider(table);
  table.trackChanges(() => {});
  d.decideSync(q("u", 60), T0);
  d.decideSync(q("moved", 60), T0);
  table.takeChanges();
  table.delete(stateKeyOf(0, 60, ringKeyOf("ns", "moved")));
  t.same(table.takeChanges(), [], "a state that moves (hand-off) is not a change");
  resetOn(table, ringKeyOf("ns", "u"), undefined, undefined, T0);
  t.same(table.takeChanges(), [stateKeyOf(0, 60, ringKeyOf("ns", "u"))], "the reset one is");
  t.equal(table.checkInvariants(), undefined);
});

t.test("remembered resets count against the table's byte bound, the newest kept", async (t) => {
  const maxBytes = 4 * 1024 * 1024;
  const table = new StateTable(100_000, T0, maxBytes);
  const d = new LocalDecider(table);
  // A table full to its byte bound first: the resets' bytes must push states out, not add on top.
  for (let i = 0; table.evictions === 0; i++) d.decideSync(q(`filler${i}`, 60), T0);
  const maximal = (i: number) => ringKeyOf("中".repeat(64), `${"中".repeat(500)}${i}`);
  // 100,000 maximal ring keys (~1.1 KB each) would be ~110 MB if only the entry count bounded them.
  for (let i = 0; i < 100_000; i++) resetOn(table, maximal(i), undefined, 60, T0 + i);
  t.ok(table.bytes <= maxBytes, `${table.bytes} bytes of ${maxBytes}`);
  t.equal(table.checkInvariants(), undefined);
  t.not(table.resetAt(maximal(99_999), T0 + 100_000), undefined, "the latest reset is remembered");
  t.equal(table.resetAt(maximal(0), T0 + 100_000), undefined, "the oldest was forgotten to stay in bounds");
});

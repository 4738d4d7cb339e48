/** The reset queue: a budget of work per event-loop turn, arrival order, a reset never split. */
import t from "tap";
import { ALGORITHMS } from "../../../src/algorithms/index.js";
import { LocalDecider } from "../../../src/shard/local/local-decider.js";
import { ResetQueue } from "../../../src/shard/local/reset-queue.js";
import { ringKeyOf } from "../../../src/shard/ring/state-key.js";
import { StateTable } from "../../../src/shard/table/state-table.js";

const T0 = Date.now();
const q = (identifier: string, duration: number) => ({ namespace: "ns", identifier, limit: 5, duration, algorithm: ALGORITHMS[0]!, cost: 1 });
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

t.test("resets beyond the turn's budget wait for later turns, in order; one larger than the budget runs whole", async (t) => {
  const table = new StateTable(10_000, T0);
  const d = new LocalDecider(table);
  for (let dur = 1; dur <= 50; dur++) d.decideSync(q("big", dur), T0);
  for (let i = 0; i < 10; i++) d.decideSync(q(`one${i}`, 60), T0);
  const queue = new ResetQueue(table, 8);
  const order: string[] = [];
  const submit = (id: string) => queue.submit(ringKeyOf("ns", id), undefined, undefined, (removed) => order.push(`${id}:${removed.length}`));
  submit("big");
  t.same(order, ["big:50"], "room in this turn: at once, all 50 states though the budget is 8");
  for (let i = 0; i < 10; i++) submit(`one${i}`);
  t.same(order, ["big:50"], "the turn's budget is spent: the others wait");
  t.equal(queue.length, 10);
  await turn();
  t.same(order.length, 1 + 4, "next turn: 4 resets of 2 work each (the reset and its state)");
  await turn();
  await turn();
  t.same(order, ["big:50", ...Array.from({ length: 10 }, (_, i) => `one${i}:1`)], "all of them, in arrival order");
  t.equal(queue.length, 0);
  t.equal(table.size, 0);
});

t.test("resets that fit run at once, synchronously", async (t) => {
  const table = new StateTable(100, T0);
  const queue = new ResetQueue(table);
  let removed = -1;
  queue.submit(ringKeyOf("ns", "none"), undefined, undefined, (r) => (removed = r.length));
  t.equal(removed, 0);
});

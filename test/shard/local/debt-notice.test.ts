/**
 * The owner's debt notice (docs/shares.md, Debt): a charge that takes a key members share
 * (fixed window, limit >= 2,048) from within its limit to past it names the window it was
 * counted in, once per crossing; a count a skewed hand-off carried into the next window
 * (algorithms/ages.ts) is named by that window, not by now's.
 */
import t from "tap";
import { algorithmByName } from "../../../src/algorithms/index.js";
import { LocalDecider } from "../../../src/shard/local/local-decider.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { StateTable } from "../../../src/shard/table/state-table.js";

const D = 60;
const NOW = 1_800_000_010_000; // 10 s into a 60 s window
const WINDOW = NOW - (NOW % (D * 1000));
const fixed = algorithmByName("fixed-window")!;

function owner(): { d: LocalDecider; notices: [string, number][] } {
  const d = new LocalDecider(new StateTable(1000, NOW));
  const notices: [string, number][] = [];
  d.indebted = (stateKey, windowStart) => notices.push([stateKey, windowStart]);
  return { d, notices };
}

t.test("into debt once: the notice names the window, and only the crossing sends one", async (t) => {
  const { d, notices } = owner();
  const ringKey = ringKeyOf("ai", "user-1");
  d.decideKey(ringKey, fixed, 4096, D, NOW, 4000, true);
  t.same(notices, [], "within the limit: no notice");
  d.decideKey(ringKey, fixed, 4096, D, NOW, 500, true);
  t.same(notices, [[stateKeyOf(fixed.code, D, ringKey), WINDOW]], "past it: the current window");
  d.decideKey(ringKey, fixed, 4096, D, NOW, 500, true);
  t.equal(notices.length, 1, "deeper into debt: no second notice");
  d.decideKey(ringKeyOf("ai", "user-small"), fixed, 1000, D, NOW, 5000, true);
  t.equal(notices.length, 1, "a limit no member shares (< 2,048): none");
});

t.test("a count carried into the next window: the notice names that window", async (t) => {
  const { d, notices } = owner();
  const ringKey = ringKeyOf("ai", "user-2");
  const stateKey = stateKeyOf(fixed.code, D, ringKey);
  const next = WINDOW + D * 1000;
  d.table.set(stateKey, { a: next, b: 4000, c: 0, expiresAt: Math.ceil((next + D * 1000) / 1000), origin: 7, born: Math.floor(NOW / 1000) });
  d.decideKey(ringKey, fixed, 4096, D, NOW, 500, true);
  t.same(notices, [[stateKey, next]], "the carried window, where the debt is held");
});

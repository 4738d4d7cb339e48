/**
 * The owner's memory of charge ids (docs/api.md, Charge ids), with the clock passed in: a
 * charge with an id is counted at most once while remembered, a retry gets the first answer
 * (an override's applied limit included), the memory is bounded in bytes and refuses an id that
 * does not fit before anything is counted, and forgets ids after their time, oldest first.
 */
import t from "tap";
import { algorithmByName } from "../../../src/algorithms/index.js";
import type { LimitQuery } from "../../../src/decision.js";
import { compilePolicy } from "../../../src/policy/index.js";
import { ChargeIds, chargeIdKey } from "../../../src/shard/local/charge-ids.js";
import { LocalDecider } from "../../../src/shard/local/local-decider.js";
import { ringKeyOf, stateKeyOf } from "../../../src/shard/ring/state-key.js";
import { StateTable } from "../../../src/shard/table/state-table.js";

const NOW = 1_800_000_000_000;
const charge = (identifier: string, cost: number, chargeId: string | undefined, over: Partial<LimitQuery> = {}): LimitQuery => ({
  namespace: "api",
  identifier,
  limit: 100,
  duration: 3600,
  algorithm: algorithmByName("fixed-window")!,
  cost,
  overridable: true,
  charge: true,
  ...(chargeId !== undefined ? { chargeId } : {}),
  ...over,
});
const countOf = (d: LocalDecider, identifier: string, now = NOW) => 100 - d.decideSync(charge(identifier, 0, undefined, { charge: false }), now).remaining;

t.test("counted at most once while remembered; forgotten after its time", async (t) => {
  const d = new LocalDecider(new StateTable(1000, NOW), 1024 * 1024, new ChargeIds(1024 * 1024, 10_000));
  const first = d.decideSync(charge("u", 30, "a"), NOW);
  t.same([first.remaining, first.duplicate, first.degraded], [70, false, null]);
  const again = d.decideSync(charge("u", 30, "a"), NOW + 9_999);
  t.same([again.remaining, again.duplicate, again.resetTime], [70, true, first.resetTime], "the first answer");
  t.equal(countOf(d, "u", NOW + 9_999), 30);
  t.equal(d.decideSync(charge("u", 30, "a"), NOW + 10_000).duplicate, false, "forgotten at CHARGE_ID_MEMORY_MS: a new charge");
  t.equal(countOf(d, "u", NOW + 10_000), 60);
  t.equal(d.decideSync(charge("v", 5, "a"), NOW).duplicate, false, "the same id for another identifier is another charge");
  t.equal(d.decideSync(charge("u", 5, "a", { algorithm: algorithmByName("token-bucket")! }), NOW).duplicate, false, "or another algorithm");
});

t.test("an override's applied limit is remembered with the answer", async (t) => {
  const d = new LocalDecider(new StateTable(1000, NOW));
  d.setPolicy(
    compilePolicy([{ path: "o.yaml", name: "o.yaml", text: "overrides:\n  - {namespace: api, identifier: big, limit: 500, duration: 60}\n" }]),
    false,
  );
  const first = d.decideSync(charge("big", 20, "x"), NOW);
  t.same([first.applied?.limit, first.applied?.duration, first.remaining], [500, 60, 480]);
  const again = d.decideSync(charge("big", 20, "x"), NOW + 1);
  t.same(
    [again.duplicate, again.applied?.limit, again.applied?.duration, again.applied?.algorithm.name, again.remaining],
    [true, 500, 60, "fixed-window", 480],
  );
});

t.test("bounded in bytes: an id that does not fit is refused before anything is counted; room comes back as ids expire", async (t) => {
  const keyOf = (id: string) => chargeIdKey(id, stateKeyOf(0, 3600, ringKeyOf("api", "w")));
  const each = ChargeIds.cost(keyOf("id-00"));
  const ids = new ChargeIds(3 * each, 1000);
  const d = new LocalDecider(new StateTable(1000, NOW), 1024 * 1024, ids);
  for (let i = 0; i < 3; i++) t.equal(d.decideSync(charge("w", 1, `id-0${i}`), NOW + i * 100).degraded, null);
  t.equal(ids.bytes, 3 * each, "each key counted at its size");
  const refused = d.decideSync(charge("w", 1, "id-03"), NOW + 300);
  t.equal(refused.degraded, "internal", "refused: the memory is full");
  t.equal(ids.refused, 1);
  t.equal(countOf(d, "w", NOW + 300), 3, "nothing counted for it");
  t.equal(d.decideSync(charge("w", 1, "id-00"), NOW + 300).duplicate, true, "no remembered id was forgotten to make room");
  // The oldest expires at NOW + 1000: room for one.
  t.equal(d.decideSync(charge("w", 1, "id-03"), NOW + 1000).degraded, null, "room again once the oldest has expired");
  t.equal(ids.size, 3);
  ids.sweep(NOW + 5000);
  t.same([ids.size, ids.bytes], [0, 0], "the sweep forgets them all");
});

import t from "tap";
import { CHARGE_COST, chargedOf, tallyCharges } from "./charges.js";
import type { LimitKey, Sample } from "./load.js";

// The charge rows' yardstick, checked on answers and counts whose outcome is known.

const key: LimitKey = { identifier: "c", algorithm: "fixed-window", limit: 2048, durationS: 3600, cost: CHARGE_COST, charge: true };

function answer(status: number, count?: number): Sample {
  return { sentAt: 0, doneAt: 1, node: 0, key: 0, status, degraded: false, resetTime: undefined, count, error: status === 0 ? "timed out" : undefined };
}

t.test("an owner's count less the shares it holds back for 0 to 14 members", async (t) => {
  for (const holders of [0, 1, 2, 14])
    for (const charges of [0, 1, 55, 1000]) t.same(chargedOf(charges * CHARGE_COST + holders * 16), { charged: charges * CHARGE_COST, holders });
  t.equal(chargedOf(15 * 16), undefined, "15 holders: no owner holds back that many");
  t.equal(chargedOf(1), undefined, "not a sum of charges and shares");
});

t.test("counted, lost, counted once though unanswered, counted twice", async (t) => {
  const c = CHARGE_COST;
  const samples = [answer(200, 2100), answer(200), answer(503), answer(0)];
  t.same(tallyCharges(samples, [key], [2 * c]), {
    charges: 4,
    counted: 2 * c,
    refused: c,
    unknown: c,
    unexpected: 0,
    final: 2 * c,
    lost: 0,
    lostPerKey: [0],
    countedUnanswered: 0,
    twice: 0,
    deepestDebt: 52,
  });
  t.match(tallyCharges(samples, [key], [c]), { lost: c, countedUnanswered: 0, twice: 0 }, "a 200 missing from the count");
  t.match(tallyCharges(samples, [key], [4 * c]), { lost: 0, countedUnanswered: 2 * c, twice: 0 }, "the 503 and the time-out counted once each");
  t.match(tallyCharges(samples, [key], [5 * c]), { lost: 0, countedUnanswered: 2 * c, twice: c }, "one more than was sent");
  t.equal(tallyCharges(samples, [key], [undefined]).final, undefined, "a count not read");
});

/** The flood budget: a token bucket on a passed-in clock. */
import t from "tap";
import { FrameBudget } from "../../../src/rls/h2/budget.js";

t.test("FrameBudget: a burst, then the refill rate, never more than the burst", async (t) => {
  const b = new FrameBudget(10, 100, 0);
  for (let i = 0; i < 10; i++) t.ok(b.spend(0));
  t.notOk(b.spend(0), "the burst is spent");
  t.notOk(b.spend(5), "5 ms refill half a token");
  t.ok(b.spend(10), "10 ms refill one");
  t.notOk(b.spend(10));
  let spent = 0;
  while (b.spend(1_000_000)) spent++;
  t.equal(spent, 10, "a long quiet refills the burst, not more");
});

import t from "tap";
import { ALGORITHMS } from "../../src/algorithms/index.js";
import { apply, checkCostInvariants, run } from "./properties.js";

const D = 60_000;
const T0 = 1_800_000_000_000;

for (const alg of ALGORITHMS) {
  t.test(`${alg.name}: cost over random sequences`, async (t) => checkCostInvariants(t, alg, 600));

  t.test(`${alg.name}: no cost means cost 1`, async (t) => {
    let state = null;
    for (let i = 0; i < 4; i++) {
      const implicit = run(alg, state, 5, D, T0 + i * 1000);
      const explicit = run(alg, state, 5, D, T0 + i * 1000, 1);
      t.same(implicit, explicit, `request ${i}`);
      state = apply(state, implicit);
    }
  });

  t.test(`${alg.name}: a cost that does not fit counts nothing`, async (t) => {
    let state = apply(null, run(alg, null, 10, D, T0, 7), 7);
    const b = run(alg, state, 10, D, T0, 4);
    t.equal(b.allowed, false, "7 + 4 > 10");
    t.ok(b.retryAfterMs > 0);
    const three = run(alg, state, 10, D, T0, 3);
    t.equal(three.allowed, true, "7 + 3 fits: the refused 4 was not counted");
    t.equal(three.remaining, 0);
    state = apply(state, three, 3);
    t.equal(run(alg, state, 10, D, T0, 0).allowed, false, "a peek at a full limit is blocked");
  });

  t.test(`${alg.name}: a peek counts nothing and shows the state as it stands`, async (t) => {
    let state = apply(null, run(alg, null, 5, D, T0), 1);
    for (let i = 0; i < 10; i++) {
      const p = run(alg, state, 5, D, T0, 0);
      t.equal(p.allowed, true);
      t.equal(p.remaining, 4, "one used of 5, however many peeks");
      state = apply(state, p, 0);
    }
    t.equal(run(alg, null, 5, D, T0, 0).remaining, 5, "a peek at a new key: all 5 left");
  });
}

t.test("fixed-window: a blocked cost waits for the next window", async (t) => {
  const alg = ALGORITHMS[0]!;
  const state = apply(null, run(alg, null, 10, D, T0 + 1000, 2), 2);
  const b = run(alg, state, 10, D, T0 + 1000, 9);
  t.equal(b.retryAfterMs, D - 1000 - (T0 % D));
});

t.test("token-bucket: a cost waits until that many tokens have refilled", async (t) => {
  const alg = ALGORITHMS[2]!;
  // 6 per minute: a token every 10 s. Empty, then 3 tokens need 30 s.
  const state = apply(null, run(alg, null, 6, D, T0, 6), 6);
  const b = run(alg, state, 6, D, T0, 3);
  t.equal(b.retryAfterMs, 30_000);
  t.equal(run(alg, state, 6, D, T0 + 29_999, 3).allowed, false);
  t.equal(run(alg, state, 6, D, T0 + 30_000, 3).allowed, true);
});

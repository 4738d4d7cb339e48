import t from "tap";
import { ALGORITHMS } from "../../src/algorithms/index.js";
import { apply, run } from "./properties.js";

const D = 3_600_000;
const T0 = 1_800_000_000_000;

// docs/api.md, Algorithm semantics: a changed limit applies to the stored state; counts are kept, remaining clamps at 0.
for (const alg of ALGORITHMS) {
  t.test(`${alg.name}: a changed limit keeps the count`, async (t) => {
    let state = null;
    for (let i = 0; i < 3; i++) state = apply(state, run(alg, state, 5, D, T0));
    t.equal(run(alg, state, 4, D, T0).remaining, 0, "3 used of 4");
    t.equal(run(alg, state, 3, D, T0).allowed, false, "3 used of 3: blocked");
    t.equal(run(alg, state, 10, D, T0).remaining, 6, "3 used of 10");
    t.equal(run(alg, state, 5, D, T0).remaining, 1, "back to 5: still 3 used");
  });
}

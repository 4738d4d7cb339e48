import t from "tap";
import { leakyBucket as alg } from "../../src/algorithms/leaky-bucket.js";
import { apply, checkInvariants, run } from "./properties.js";

const D = 10_000;
const T0 = 1_800_000_000_000;

t.test("a meter that drains continuously at limit/D", async (t) => {
  let state = null;
  for (let i = 0; i < 5; i++) state = apply(state, run(alg, state, 5, D, T0));
  const b = run(alg, state, 5, D, T0 + 500);
  t.equal(b.allowed, false, "full");
  t.equal(b.retryAfterMs, 1500, "one unit drains every 2 s");
  t.equal(b.resetMs, T0 + 10_000, "empty after D");
  t.equal(run(alg, state, 5, D, T0 + 2000).allowed, true);
});

t.test("merge adds both meters", async (t) => {
  let x = null;
  let y = null;
  for (let i = 0; i < 2; i++) x = apply(x, run(alg, x, 5, D, T0));
  for (let i = 0; i < 2; i++) y = apply(y, run(alg, y, 5, D, T0 + 1000));
  const out = { a: 0, b: 0, c: 0 };
  alg.merge(x!, y!, D, T0 + 1000, out);
  // x drained 0.5 unit in 1 s: 1.5 + 2 = 3.5 units; one more fits (4.5), none after.
  const s = run(alg, out, 5, D, T0 + 1000);
  t.equal(s.allowed, true);
  t.equal(s.remaining, 0);
});

t.test("invariants over random sequences", async (t) => checkInvariants(t, alg, 400));

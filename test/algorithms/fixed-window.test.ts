import t from "tap";
import { fixedWindow as alg } from "../../src/algorithms/fixed-window.js";
import { apply, checkInvariants, run } from "./properties.js";

const D = 60_000;
const T0 = 1_800_000_000_000; // a multiple of 60 s: a window start

t.test("windows are aligned to the epoch and hold `limit` requests", async (t) => {
  let state = null;
  for (let i = 1; i <= 3; i++) {
    const s = run(alg, state, 3, D, T0 + 10_000);
    t.equal(s.allowed, true);
    t.equal(s.remaining, 3 - i);
    t.equal(s.resetMs, T0 + D, "reset at the window end");
    state = apply(state, s);
  }
  const blocked = run(alg, state, 3, D, T0 + 10_000);
  t.equal(blocked.allowed, false);
  t.equal(blocked.retryAfterMs, 50_000, "wait to the window end");
  t.equal(run(alg, state, 3, D, T0 + D - 1).allowed, false, "1 ms before the boundary: blocked");
  const next = run(alg, state, 3, D, T0 + D);
  t.equal(next.allowed, true, "new window");
  t.equal(next.remaining, 2);
});

t.test("merge adds counts of the same window, drops older windows", async (t) => {
  const out = { a: 0, b: 0, c: 0 };
  alg.merge({ a: T0, b: 2, c: 0 }, { a: T0, b: 3, c: 0 }, D, T0, out);
  t.same(out, { a: T0, b: 5, c: 0 });
  alg.merge({ a: T0 - D, b: 9, c: 0 }, { a: T0, b: 1, c: 0 }, D, T0, out);
  t.same(out, { a: T0, b: 1, c: 0 });
});

t.test("invariants over random sequences", async (t) => checkInvariants(t, alg, 400));

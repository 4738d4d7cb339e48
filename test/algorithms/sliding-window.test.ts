import t from "tap";
import { slidingWindow as alg } from "../../src/algorithms/sliding-window.js";
import { apply, checkInvariants, run } from "./properties.js";

const D = 60_000;
const T0 = 1_800_000_000_000;

t.test("the two-window estimate decides", async (t) => {
  // 10 in the previous window, limit 10: at 30% into the current window the estimate is 7.
  let state: { a: number; b: number; c: number } | null = { a: T0 - D, b: 10, c: 0 };
  const at = T0 + 18_000;
  const results = [];
  for (let i = 0; i < 4; i++) {
    const s = run(alg, state, 10, D, at);
    results.push(s.allowed);
    state = apply(state, s);
  }
  t.same(results, [true, true, true, false], "7 + 3 = 10 allowed, the 4th is over");
  const blocked = run(alg, state, 10, D, at);
  // estimate + 1 ≤ 10 ⇔ 10 × (1 − e/D) + 3 ≤ 9 ⇔ e ≥ 0.4 D = 24 s
  t.equal(blocked.retryAfterMs, 24_000 - 18_000);
});

t.test("previous window only counts when adjacent", async (t) => {
  const state = { a: T0 - 2 * D, b: 10, c: 0 };
  t.equal(run(alg, state, 10, D, T0).remaining, 9, "two windows ago is forgotten");
});

t.test("reset is the end of the next window while the current one has requests", async (t) => {
  const s = run(alg, null, 5, D, T0 + 1000);
  t.equal(s.resetMs, T0 + 2 * D);
});

t.test("limit 1: the wait can span into the window after next", async (t) => {
  const state = apply(null, run(alg, null, 1, D, T0 + 59_000));
  const b = run(alg, state, 1, D, T0 + 59_500);
  t.equal(b.allowed, false);
  t.equal(b.retryAfterMs, 2 * D - 59_500, "the single request weighs until the end of the next window");
});

t.test("merge aligns windows and adds counts", async (t) => {
  const out = { a: 0, b: 0, c: 0 };
  alg.merge({ a: T0, b: 2, c: 4 }, { a: T0 - D, b: 3, c: 1 }, D, T0, out);
  t.same(out, { a: T0, b: 2, c: 7 }, "the older state's current window is the merged previous");
  alg.merge({ a: T0, b: 2, c: 4 }, { a: T0, b: 1, c: 1 }, D, T0, out);
  t.same(out, { a: T0, b: 3, c: 5 });
  alg.merge({ a: T0 - 2 * D, b: 9, c: 9 }, { a: T0, b: 1, c: 1 }, D, T0, out);
  t.same(out, { a: T0, b: 1, c: 1 }, "a state two windows old counts nothing");
});

t.test("mergeCopies aligns windows and keeps the larger count of each", async (t) => {
  const out = { a: 0, b: 0, c: 0 };
  alg.mergeCopies({ a: T0, b: 2, c: 4 }, { a: T0 - D, b: 3, c: 1 }, D, T0, out);
  t.same(out, { a: T0, b: 2, c: 4 }, "the older copy's current window is the previous one: max(4, 3)");
  alg.mergeCopies({ a: T0, b: 2, c: 4 }, { a: T0, b: 5, c: 1 }, D, T0, out);
  t.same(out, { a: T0, b: 5, c: 4 });
  const x = { a: T0, b: 3, c: 2 };
  alg.mergeCopies(x, x, D, T0, x);
  t.same(x, { a: T0, b: 3, c: 2 }, "a copy merged with itself (and into itself) is unchanged");
  alg.merge(x, { a: T0 - D, b: 4, c: 0 }, D, T0, x);
  t.same(x, { a: T0, b: 3, c: 6 }, "merge into one of its inputs");
});

t.test("invariants over random sequences", async (t) => checkInvariants(t, alg, 400));

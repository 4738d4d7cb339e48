import t from "tap";
import { ALGORITHMS, type LimitState } from "../../src/algorithms/index.js";
import { apply, run } from "./properties.js";

// States cross nodes as ages (docs/peer-protocol.md, "States on the wire"): written at the
// sender's `now`, read back at the reader's, whose clock may be minutes off.

const D = 60_000;
const T0 = 1_800_000_000_000; // a window start
const SKEWS = [-300_000, -30_001, -1, 0, 1, 29_999, 30_000, 300_000];

/** A state after `n` requests at `at`. */
function used(code: number, n: number, at: number): LimitState {
  const alg = ALGORITHMS[code]!;
  let state: LimitState | null = null;
  for (let i = 0; i < n; i++) state = apply(state, run(alg, state, 20, D, at));
  return state!;
}

function carried(code: number, state: LimitState, sentAt: number, readAt: number): LimitState {
  const alg = ALGORITHMS[code]!;
  const aged = { a: 0, b: 0, c: 0 };
  alg.toAges(state, sentAt, aged);
  const out = { a: 0, b: 0, c: 0 };
  alg.fromAges(aged, D, readAt, out);
  return out;
}

t.test("on one clock, ages give the state back unchanged", async (t) => {
  for (const alg of ALGORITHMS) {
    for (const phase of [0, 1, 29_000, D - 1]) {
      const state = used(alg.code, 7, T0 + phase);
      for (const later of [0, 5, D - phase - 1])
        t.same(carried(alg.code, state, T0 + phase + later, T0 + phase + later), state, `${alg.name} +${phase} read ${later} ms later`);
    }
  }
});

t.test("buckets: read on a skewed clock, the next requests get exactly the answers the sender would give", async (t) => {
  for (const code of [2, 3]) {
    const alg = ALGORITHMS[code]!;
    for (const skew of SKEWS) {
      const sentAt = T0 + 12_345;
      const state = used(code, 15, sentAt - 4000);
      const moved = carried(code, state, sentAt, sentAt + skew);
      for (const after of [0, 1000, 6000, 50_000]) {
        const there = run(alg, state, 20, D, sentAt + after);
        const here = run(alg, moved, 20, D, sentAt + skew + after);
        t.equal(here.remaining, there.remaining, `${alg.name} skew ${skew} ms, ${after} ms after: remaining`);
        t.equal(here.retryAfterMs, there.retryAfterMs, "retry");
        t.equal(here.resetMs - skew, there.resetMs, "reset, on each node's clock");
      }
    }
  }
});

t.test("windows: the sender's current window is the reader's current window, whatever the skew and phase", async (t) => {
  for (const code of [0, 1]) {
    const alg = ALGORITHMS[code]!;
    for (const skew of SKEWS) {
      for (const phase of [0, 1000, 30_000, D - 1]) {
        const sentAt = T0 + phase;
        const state = used(code, 15, sentAt);
        const readAt = sentAt + skew;
        const moved = carried(code, state, sentAt, readAt);
        t.equal(moved.a, readAt - (readAt % D), `${alg.name} skew ${skew} phase ${phase}: the reader's current window`);
        t.equal(moved.b, 15, "its count");
        const here = run(alg, moved, 20, D, readAt);
        t.equal(here.remaining, 4, "the same requests left as on the sender: 20 − 15 − this one");
      }
    }
  }
});

t.test("windows keep how many whole windows ago they began; a start slightly ahead reads as current", async (t) => {
  const alg = ALGORITHMS[1]!; // sliding: the previous window still weighs
  const readAt = T0 + 7 * D + 123;
  const out = { a: 0, b: 0, c: 0 };
  alg.fromAges({ a: D + 5, b: 9, c: 2 }, D, readAt, out);
  t.same(out, { a: T0 + 6 * D, b: 9, c: 2 }, "a window begun one window ago is the reader's previous one");
  alg.fromAges({ a: -500, b: 9, c: 2 }, D, readAt, out);
  t.same(out, { a: T0 + 7 * D, b: 9, c: 2 }, "a start 500 ms after the send is the current window");
});

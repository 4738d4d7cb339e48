import t from "tap";
import { ALGORITHMS, type LimitState } from "../../src/algorithms/index.js";
import { apply, run } from "./properties.js";
import { CARRY_SLACK_MS } from "../../src/algorithms/ages.js";

// States cross nodes as ages (docs/peer-protocol.md, "States on the wire"): written at the
// sender's `now`, read back at the reader's, whose clock may be minutes off.

const D = 60_000;
const T0 = 1_800_000_000_000; // a window start
const SKEWS = [-300_000, -30_001, -1, 0, 1, 29_999, 30_000, 300_000];
const BOUNDS = { maxLimit: 1000, maxDurationMs: 86_400_000, ageToleranceMs: 1000 };

/** A state after `n` requests at `at`. */
function used(code: number, n: number, at: number): LimitState {
  const alg = ALGORITHMS[code]!;
  let state: LimitState | null = null;
  for (let i = 0; i < n; i++) state = apply(state, run(alg, state, 20, D, at));
  return state!;
}

/** `state` sent at `sentAt` as the wire and snapshots send it (leaving, then ages), read at `readAt`. */
function carried(code: number, state: LimitState, sentAt: number, readAt: number): LimitState {
  const alg = ALGORITHMS[code]!;
  const aged = { a: 0, b: 0, c: 0 };
  alg.leaving(state, sentAt, aged);
  alg.toAges(aged, sentAt, aged);
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

t.test("sliding windows: a handed-off count weighs on the reader, behind or ahead, at least as on the sender", async (t) => {
  const alg = ALGORITHMS[1]!;
  for (const skew of SKEWS) {
    for (const phase of [0, 1000, 30_000, D - 1]) {
      for (const [now, before] of [
        [15, 0],
        [6, 9],
      ]) {
        // `before` requests in the sender's previous window, `now` in its current one, sent at T0 + phase.
        const sentAt = T0 + phase;
        let s: LimitState | null = before > 0 ? used(1, before, sentAt - D) : null;
        for (let i = 0; i < now; i++) s = apply(s, run(alg, s, 20, D, sentAt));
        const moved = carried(1, s!, sentAt, sentAt + skew);
        const name = `skew ${skew} phase ${phase} (${before} + ${now})`;
        t.ok(moved.a <= sentAt + skew - ((sentAt + skew) % D) + D, `${name}: at most the reader's next window`);
        let wrong = "";
        // Every 250 ms over the next two windows: no more admitted on the reader than on the sender a slack later.
        for (let after = 0; after <= 2 * D && wrong === ""; after += 250) {
          const here = run(alg, moved, 20, D, sentAt + skew + after).remaining;
          const there = run(alg, s, 20, D, sentAt + after + CARRY_SLACK_MS).remaining;
          if (here > there) wrong = `${after} ms after the send: ${here} left on the reader, ${there} on the sender`;
        }
        t.equal(wrong, "", `${name}: never released before the sender would release it`);
        t.ok(run(alg, moved, 20, D, moved.a + 2 * D).remaining === 19, `${name}: released two windows after the window it landed in`);
      }
    }
  }
});

t.test("sliding windows: requests join a carried count at its start's weights, and merges keep all that weighs now", async (t) => {
  const alg = ALGORITHMS[1]!;
  const now = T0 + 40_000;
  const carriedState = { a: T0 + D, b: 6, c: 9 }; // carried into the next window: 6 there, 9 in this one
  const first = run(alg, carriedState, 20, D, now);
  t.same([first.allowed, first.remaining, first.a, first.b, first.c], [true, 4, T0 + D, 7, 9], "counted into the carried window, both counts whole");
  const full = { a: T0 + D, b: 11, c: 9 };
  const blocked = run(alg, full, 20, D, now);
  t.equal(blocked.allowed, false, "full until the carried window begins");
  // From T0 + D the 9 fade: one more fits once 9 × (D − e) ≤ (20 − 1 − 11) × D, e = D − 8D/9.
  t.equal(blocked.retryAfterMs, T0 + D + (D - Math.floor((8 * D) / 9)) - now, "retry counted from the carried window's start");
  t.equal(run(alg, full, 20, D, now + blocked.retryAfterMs).allowed, true, "allowed then");
  t.equal(run(alg, full, 20, D, now + blocked.retryAfterMs - 1).allowed, false, "not a millisecond before");
  const merged = { a: 0, b: 0, c: 0 };
  alg.merge(carriedState, { a: T0, b: 3, c: 2 }, D, now, merged);
  t.same(merged, { a: T0 + D, b: 6, c: 14 }, "a current state beside a carried one: all it weighs now goes whole into the previous count");
  alg.merge(carriedState, { a: T0 - D, b: 3, c: 2 }, D, now, merged);
  t.same(merged, { a: T0 + D, b: 6, c: 12 }, "the previous window's count still weighs; the one before it does not");
  alg.mergeCopies(carriedState, { a: T0, b: 12, c: 0 }, D, now, merged);
  t.same(merged, { a: T0 + D, b: 6, c: 12 }, "copies: the larger count, window by window");
  t.equal(alg.checkAged({ a: -D, b: 3, c: 1 }, D, BOUNDS), "invalid", "a carried start on the wire is refused like a forged one");
  alg.leaving(carriedState, now, merged);
  t.same(merged, { a: now, b: 6, c: 9 }, "it leaves as begun at the send");
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

t.test("fixed windows: a handed-off count holds until the sender's window ends, on a reader behind or ahead", async (t) => {
  const alg = ALGORITHMS[0]!;
  for (const skew of SKEWS) {
    for (const phase of [0, 1000, 30_000, D - 1]) {
      // Reader time = sender time + skew; the sender's window is [T0, T0 + D) on its clock.
      const sentAt = T0 + phase;
      const moved = carried(0, used(0, 15, sentAt), sentAt, sentAt + skew);
      const name = `skew ${skew} phase ${phase}`;
      t.equal(run(alg, moved, 20, D, sentAt + skew).remaining, 4, `${name}: the same requests left as on the sender`);
      const lastHeld = T0 + D - 1 - CARRY_SLACK_MS + skew;
      if (lastHeld >= sentAt + skew) t.equal(run(alg, moved, 20, D, lastHeld).remaining, 4, `${name}: still counted as the sender's window ends`);
      // Held less than one window longer than the sender would have.
      t.ok(moved.a + D <= T0 + 2 * D + skew, `${name}: released within a window of the sender's end`);
      t.equal(run(alg, moved, 20, D, moved.a + D).remaining, 19, `${name}: released by then`);
    }
  }
});

t.test("fixed windows: a carried count is sent on as begun at the send, and every next reader holds it to the first sender's end", async (t) => {
  const alg = ALGORITHMS[0]!;
  for (const skew1 of SKEWS) {
    for (const skew2 of SKEWS) {
      for (const phase of [1000, 45_000, D - 1]) {
        for (const held of [0, 7000, 50_000]) {
          // Sender 0 at T0 + phase; reader 1 (sender 0's clock + skew1) sends it on `held` ms later to reader 2 (+ skew2).
          const sentAt = T0 + phase;
          const first = carried(0, used(0, 15, sentAt), sentAt, sentAt + skew1);
          const resentAt = sentAt + skew1 + held;
          if (resentAt >= first.a + D) continue; // released on reader 1 by then, as it must be
          const aged = { a: 0, b: 0, c: 0 };
          alg.leaving(first, resentAt, aged);
          alg.toAges(aged, resentAt, aged);
          const name = `skews ${skew1}, ${skew2} phase ${phase} sent on after ${held} ms`;
          t.ok(aged.a >= 0, `${name}: no start after the send on the wire`);
          t.equal(alg.checkAged({ ...aged }, D, BOUNDS), "ok", `${name}: accepted as any state`);
          const second = carried(0, first, resentAt, resentAt - skew1 + skew2);
          const lastHeld = T0 + D - 1 - CARRY_SLACK_MS + skew2;
          const readAt = resentAt - skew1 + skew2;
          if (lastHeld >= readAt) t.equal(run(alg, second, 20, D, lastHeld).remaining, 4, `${name}: still counted as sender 0's window ends`);
          t.ok(second.a + D <= readAt + 2 * D, `${name}: held at most a window past the send on`);
        }
      }
    }
  }
});

t.test("fixed windows: requests join a carried count, and merges keep both counts that still count", async (t) => {
  const alg = ALGORITHMS[0]!;
  const now = T0 + 40_000;
  const carriedState = { a: T0 + D, b: 15, c: 0 }; // carried into the next window
  let state: LimitState = carriedState;
  for (let i = 0; i < 5; i++) state = apply(state, run(alg, state, 20, D, now))!;
  t.same(state, { a: T0 + D, b: 20, c: 0 }, "counted into the carried window");
  const out = run(alg, state, 20, D, now + 30_000);
  t.equal(out.allowed, false, "still full after the reader's own window ends");
  t.equal(out.resetMs, T0 + 2 * D, "reset_time names the carried window's end");
  const merged = { a: 0, b: 0, c: 0 };
  alg.merge(carriedState, { a: T0, b: 3, c: 0 }, D, now, merged);
  t.same(merged, { a: T0 + D, b: 18, c: 0 }, "a current count beside a carried one: both count");
  alg.merge(carriedState, { a: T0 - D, b: 3, c: 0 }, D, now, merged);
  t.same(merged, { a: T0 + D, b: 15, c: 0 }, "an ended window counts nothing");
  alg.mergeCopies(carriedState, { a: T0, b: 17, c: 0 }, D, now, merged);
  t.same(merged, { a: T0 + D, b: 17, c: 0 }, "copies of one history: the larger count, in the later window");
  alg.refund(carriedState, 5, now, D, now, merged);
  t.same(merged, carriedState, "a refund of a request counted into a carried window gives nothing back (counting errs towards holding)");
});

t.test("fixed windows: a start after the send is refused beyond the tolerance, carried or forged", async (t) => {
  const alg = ALGORITHMS[0]!;
  t.equal(alg.checkAged({ a: -1000, b: 3, c: 0 }, D, BOUNDS), "ok", "a start up to the tolerance ahead (a clock stepped back)");
  t.equal(alg.checkAged({ a: -1001, b: 3, c: 0 }, D, BOUNDS), "invalid", "one beyond it");
  t.equal(alg.checkAged({ a: -D, b: 3, c: 0 }, D, BOUNDS), "invalid", "a whole window ahead, as a carried start would be");
  // What leaves a node holding a carried state is never that.
  const carriedState = { a: T0 + D, b: 15, c: 0 };
  const out = { a: 0, b: 0, c: 0 };
  alg.leaving(carriedState, T0 + 40_000, out);
  t.same(out, { a: T0 + 40_000, b: 15, c: 0 }, "a carried start leaves as begun at the send");
  alg.leaving({ a: T0, b: 15, c: 0 }, T0 + 40_000, out);
  t.same(out, { a: T0, b: 15, c: 0 }, "a current start leaves as it is");
});

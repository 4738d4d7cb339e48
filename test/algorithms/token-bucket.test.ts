import t from "tap";
import { leakyBucket } from "../../src/algorithms/leaky-bucket.js";
import { tokenBucket as alg } from "../../src/algorithms/token-bucket.js";
import { apply, checkInvariants, prng, run } from "./properties.js";

const D = 60_000;
const T0 = 1_800_000_000_000;

t.test("starts full, refills continuously at limit/D", async (t) => {
  let state = null;
  for (let i = 0; i < 6; i++) state = apply(state, run(alg, state, 6, D, T0));
  const b = run(alg, state, 6, D, T0);
  t.equal(b.allowed, false, "empty after 6");
  t.equal(b.retryAfterMs, 10_000, "one token per 10 s");
  t.equal(b.resetMs, T0 + 60_000, "full again after 60 s");
  const later = run(alg, state, 6, D, T0 + 25_000);
  t.equal(later.allowed, true);
  t.equal(later.remaining, 1, "2.5 tokens refilled, one taken");
});

t.test("retry is rounded up to the millisecond and exact", async (t) => {
  // 7 per 60 s: a token every 8571.43 ms.
  let state = null;
  for (let i = 0; i < 7; i++) state = apply(state, run(alg, state, 7, D, T0));
  const b = run(alg, state, 7, D, T0);
  t.equal(b.retryAfterMs, 8572);
  t.equal(run(alg, state, 7, D, T0 + 8571).allowed, false);
  t.equal(run(alg, state, 7, D, T0 + 8572).allowed, true);
});

t.test("merge adds both sides' consumption", async (t) => {
  let x = null;
  let y = null;
  for (let i = 0; i < 3; i++) x = apply(x, run(alg, x, 10, D, T0));
  for (let i = 0; i < 4; i++) y = apply(y, run(alg, y, 10, D, T0));
  const out = { a: 0, b: 0, c: 0 };
  alg.merge(x!, y!, D, T0, out);
  t.equal(run(alg, out, 10, D, T0).remaining, 2, "7 taken of 10, this one makes 8");
  // Over-consumption is kept as a debt rather than forgotten.
  alg.merge(out, out, D, T0, out);
  const b = run(alg, out, 10, D, T0);
  t.equal(b.allowed, false);
  t.equal(b.retryAfterMs, 5 * 6000, "14 taken of 10: 4 owed + 1 needed = 5 tokens at 6 s each");
});

t.test("token bucket and leaky bucket admit exactly the same requests", async (t) => {
  let compared = 0;
  for (let seed = 1; seed <= 300; seed++) {
    const rnd = prng(seed);
    const limit = 1 + Math.floor(rnd() * 20);
    const d = (1 + Math.floor(rnd() * 30)) * 1000;
    let now = T0 + Math.floor(rnd() * 1e6);
    let tok = null;
    let leak = null;
    for (let i = 0; i < 80; i++) {
      now += rnd() < 0.6 ? 0 : Math.floor((rnd() * (2 * d)) / limit);
      const a = run(alg, tok, limit, d, now);
      const b = run(leakyBucket, leak, limit, d, now);
      if (a.allowed !== b.allowed || a.remaining !== b.remaining || a.retryAfterMs !== b.retryAfterMs || a.resetMs !== b.resetMs) {
        return void t.fail(`differ at seed ${seed} step ${i}`);
      }
      tok = apply(tok, a);
      leak = apply(leak, b);
      compared++;
    }
  }
  t.pass(`${compared} decisions identical`);
});

t.test("invariants over random sequences", async (t) => checkInvariants(t, alg, 400));

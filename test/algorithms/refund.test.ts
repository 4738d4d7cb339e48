/**
 * refund: a reservation released gives back what it counted. Over random sequences, a
 * cost counted at t0 and refunded at t1 ≥ t0 leaves a state that admits exactly what the
 * state without it admits, at t1 and later. Windows stay exact with other requests in
 * between; buckets are exact when nothing else came in between (see Algorithm.refund).
 */
import t from "tap";
import { ALGORITHMS, type Algorithm, type LimitState } from "../../src/algorithms/index.js";
import { admitsNow, apply, prng, run } from "./properties.js";

function refunded(alg: Algorithm, state: LimitState, cost: number, countedAt: number, D: number, now: number): LimitState {
  const out = { a: 0, b: 0, c: 0 };
  alg.refund(state, cost, countedAt, D, now, out);
  return out;
}

for (const alg of ALGORITHMS) {
  const windows = alg.name.endsWith("window");
  t.test(`${alg.name}: a refunded cost is as if never counted`, async (t) => {
    let checked = 0;
    for (let seed = 1; seed <= 1000; seed++) {
      const rnd = prng(seed * 31337 + alg.code);
      const limit = 1 + Math.floor(rnd() * 20);
      const D = (1 + Math.floor(rnd() * 60)) * 1000;
      let now = 1_700_000_000_000 + Math.floor(rnd() * 10_000_000);
      let without: LimitState | null = null;
      // Some history first.
      for (let i = 0, n = Math.floor(rnd() * 2 * limit); i < n; i++) {
        now += Math.floor(rnd() * (D / limit));
        without = apply(without, run(alg, without, limit, D, now));
      }
      const cost = 1 + Math.floor(rnd() * limit);
      const counted = run(alg, without, limit, D, now, cost);
      if (!counted.allowed) continue;
      const t0 = now;
      let withIt: LimitState = apply(without, counted, cost)!;
      // Meanwhile: other requests, for windows, counted on both.
      for (let i = 0, n = windows ? Math.floor(rnd() * 4) : 0; i < n; i++) {
        now += Math.floor(rnd() * (D / 2));
        const s = run(alg, withIt, limit, D, now);
        if (!s.allowed) continue;
        withIt = apply(withIt, s)!;
        without = apply(without, run(alg, without, limit, D, now));
      }
      now += rnd() < 0.5 ? 0 : Math.floor(rnd() * D * 1.5);
      const back = refunded(alg, withIt, cost, t0, D, now);
      for (const later of [0, 1, Math.floor(D / 3), D, 2 * D]) {
        const want = admitsNow(alg, without, limit, D, now + later);
        const got = admitsNow(alg, back, limit, D, now + later);
        if (got !== want)
          return void t.fail(`seed ${seed}: ${got} admitted after the refund, ${want} without the cost (+${later} ms, limit ${limit}, cost ${cost}, D ${D})`);
      }
      checked++;
    }
    t.ok(checked > 250, `${checked} refunds checked`);
  });
}

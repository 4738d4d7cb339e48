import type { Test } from "tap";
import { prng } from "../harness/prng.js";

export { prng };
import { newStep, type Algorithm, type LimitState, type Step } from "../../src/algorithms/index.js";

export function run(alg: Algorithm, state: LimitState | null, limit: number, D: number, now: number): Step {
  const out = newStep();
  alg.step(state, limit, D, now, out);
  return out;
}

export function apply(state: LimitState | null, step: Step): LimitState | null {
  return step.allowed ? { a: step.a, b: step.b, c: step.c } : state;
}

/** How many requests in a row would be allowed at `now` starting from `state`. */
export function admitsNow(alg: Algorithm, state: LimitState | null, limit: number, D: number, now: number): number {
  let n = 0;
  for (;;) {
    const s = run(alg, state, limit, D, now);
    if (!s.allowed) return n;
    state = apply(state, s);
    n++;
  }
}

/**
 * Random request sequences (bursts, pauses, limit changes) checked against the DESIGN §3
 * invariants on every single step:
 *  - a 200 has count + remaining = limit, and `remaining` is exactly how many more would be allowed now;
 *  - a blocked request changes nothing and has retryAfterMs > 0 that is exact: blocked at
 *    now + retry − 1, allowed at now + retry;
 *  - reset: from `resetMs` on the key is back to its full limit, 1 ms earlier it is not.
 */
export function checkInvariants(t: Test, alg: Algorithm, seeds: number): void {
  let steps = 0;
  let blocked = 0;
  for (let seed = 1; seed <= seeds; seed++) {
    const rnd = prng(seed * 7919 + alg.code);
    let limit = 1 + Math.floor(rnd() * 12);
    const D = (1 + Math.floor(rnd() * 90)) * 1000;
    let now = 1_700_000_000_000 + Math.floor(rnd() * 10_000_000);
    let state: LimitState | null = null;
    for (let i = 0; i < 60; i++) {
      const r = rnd();
      if (r < 0.5) now += 0;
      else if (r < 0.8) now += Math.floor(rnd() * (D / limit));
      else if (r < 0.95) now += Math.floor(rnd() * D * 2);
      else limit = 1 + Math.floor(rnd() * 12);
      const s = run(alg, state, limit, D, now);
      steps++;
      const where = `seed ${seed} step ${i} (${alg.name}, limit ${limit}, D ${D})`;
      if (s.allowed) {
        const after = apply(state, s);
        const more = admitsNow(alg, after, limit, D, now);
        if (s.remaining !== more) return void t.fail(`remaining ${s.remaining} but ${more} more admitted: ${where}`);
        if (s.remaining < 0 || s.remaining > limit - 1) return void t.fail(`remaining out of range: ${where}`);
        if (s.retryAfterMs !== 0) return void t.fail(`retry on allowed: ${where}`);
        checkReset(t, alg, after!, limit, D, now, s.resetMs, where);
        state = after;
      } else {
        blocked++;
        if (!(s.retryAfterMs > 0) || !Number.isInteger(s.retryAfterMs)) return void t.fail(`bad retry ${s.retryAfterMs}: ${where}`);
        if (s.remaining !== 0) return void t.fail(`blocked with remaining: ${where}`);
        if (run(alg, state, limit, D, now + s.retryAfterMs - 1).allowed) return void t.fail(`allowed 1 ms before retry: ${where}`);
        if (!run(alg, state, limit, D, now + s.retryAfterMs).allowed) return void t.fail(`blocked at retry: ${where}`);
        if (state !== null) checkReset(t, alg, state, limit, D, now, s.resetMs, where);
      }
    }
  }
  t.ok(blocked > steps / 20, `${steps} steps checked, ${blocked} blocked`);
}

function checkReset(t: Test, alg: Algorithm, state: LimitState, limit: number, D: number, now: number, resetMs: number, where: string): void {
  if (resetMs < now) t.fail(`reset in the past: ${where}`);
  if (admitsNow(alg, state, limit, D, resetMs) !== limit) t.fail(`not full at reset ${resetMs - now} ms ahead: ${where}`);
  if (resetMs > now && admitsNow(alg, state, limit, D, resetMs - 1) === limit) t.fail(`already full 1 ms before reset: ${where}`);
  if (alg.expiresAt(state, limit, D) > resetMs && alg.name !== "sliding-window") t.fail(`expires after reset: ${where}`);
}

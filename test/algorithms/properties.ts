import type { Test } from "tap";
import { prng } from "../harness/prng.js";

export { prng };
import { newStep, type Algorithm, type LimitState, type Step } from "../../src/algorithms/index.js";

export function run(alg: Algorithm, state: LimitState | null, limit: number, D: number, now: number, cost?: number): Step {
  const out = newStep();
  if (cost === undefined) alg.step(state, limit, D, now, out);
  else alg.step(state, limit, D, now, out, cost);
  return out;
}

/** The state after `step`: what the table stores (nothing for a blocked request or a peek). */
export function apply(state: LimitState | null, step: Step, cost = 1): LimitState | null {
  return step.allowed && cost > 0 ? { a: step.a, b: step.b, c: step.c } : state;
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
 * Random request sequences (bursts, pauses, limit changes) checked against the docs/api.md
 * invariants on every single step:
 *  - a 200 has count + remaining = limit, and `remaining` is exactly how many more would be allowed now;
 *  - a blocked request changes nothing and has retryAfterMs > 0 that is exact: blocked at
 *    now + retry − 1, allowed at now + retry;
 *  - reset: from `resetMs` on the key is back to its full limit, 1 ms earlier it is not.
 */
export function checkInvariants(t: Test, alg: Algorithm, seeds: number): void {
  let steps = 0;
  let blocked = 0;
  const completed = walkSequences(alg, seeds, 7919, 12, 0.5, (w) => {
    const { limit, D, now, state } = w;
    const s = run(alg, state, limit, D, now);
    steps++;
    const where = `seed ${w.seed} step ${w.step} (${alg.name}, limit ${limit}, D ${D})`;
    if (s.allowed) {
      const after = apply(state, s);
      const more = admitsNow(alg, after, limit, D, now);
      if (s.remaining !== more) return void t.fail(`remaining ${s.remaining} but ${more} more admitted: ${where}`);
      if (s.remaining < 0 || s.remaining > limit - 1) return void t.fail(`remaining out of range: ${where}`);
      if (s.retryAfterMs !== 0) return void t.fail(`retry on allowed: ${where}`);
      checkReset(t, alg, after!, limit, D, now, s.resetMs, where);
      w.state = after;
    } else {
      blocked++;
      const wrong = blockedProblem(alg, w, s);
      if (wrong !== undefined) return void t.fail(`${wrong}: ${where}`);
      if (state !== null) checkReset(t, alg, state, limit, D, now, s.resetMs, where);
    }
    return true;
  });
  if (completed) t.ok(blocked > steps / 20, `${steps} steps checked, ${blocked} blocked`);
}

/** One step of a random sequence: where it stands, and the state the table holds for it. */
interface Walk {
  readonly rnd: () => number;
  readonly seed: number;
  step: number;
  limit: number;
  readonly D: number;
  now: number;
  state: LimitState | null;
}

/**
 * The random request sequences of both property checks: `seeds` sequences of 60 steps, each
 * with its own limit (1..maxLimit), window (1..90 s) and start. Before each step time stands
 * still (with probability `still`), moves up to one request's share of the window, moves up
 * to two windows on, or (1 in 20) the limit changes. `visit` keeps `state` up to date and
 * returns anything but true to end the walk (a failure): then the result is false.
 */
function walkSequences(alg: Algorithm, seeds: number, salt: number, maxLimit: number, still: number, visit: (w: Walk) => boolean | undefined): boolean {
  for (let seed = 1; seed <= seeds; seed++) {
    const rnd = prng(seed * salt + alg.code);
    const limit = 1 + Math.floor(rnd() * maxLimit);
    const D = (1 + Math.floor(rnd() * 90)) * 1000;
    const now = 1_700_000_000_000 + Math.floor(rnd() * 10_000_000);
    const w: Walk = { rnd, seed, step: 0, limit, D, now, state: null };
    for (; w.step < 60; w.step++) {
      const r = rnd();
      if (r < still) w.now += 0;
      else if (r < 0.8) w.now += Math.floor(rnd() * (D / w.limit));
      else if (r < 0.95) w.now += Math.floor(rnd() * D * 2);
      else w.limit = 1 + Math.floor(rnd() * maxLimit);
      if (visit(w) !== true) return false;
    }
  }
  return true;
}

/** What is wrong with a blocked answer `s` (it must say when the same request is allowed, to the ms), or undefined. */
function blockedProblem(alg: Algorithm, w: Walk, s: Step, cost?: number): string | undefined {
  const { state, limit, D, now } = w;
  if (!(s.retryAfterMs > 0) || !Number.isInteger(s.retryAfterMs)) return `bad retry ${s.retryAfterMs}`;
  if (s.remaining !== 0) return "blocked with remaining";
  if (run(alg, state, limit, D, now + s.retryAfterMs - 1, cost).allowed) return "allowed 1 ms before retry";
  if (!run(alg, state, limit, D, now + s.retryAfterMs, cost).allowed) return "blocked at retry";
  return undefined;
}

function checkReset(t: Test, alg: Algorithm, state: LimitState, limit: number, D: number, now: number, resetMs: number, where: string): void {
  if (resetMs < now) t.fail(`reset in the past: ${where}`);
  if (admitsNow(alg, state, limit, D, resetMs) !== limit) t.fail(`not full at reset ${resetMs - now} ms ahead: ${where}`);
  if (resetMs > now && admitsNow(alg, state, limit, D, resetMs - 1) === limit) t.fail(`already full 1 ms before reset: ${where}`);
  if (alg.expiresAt(state, limit, D) > resetMs && alg.name !== "sliding-window") t.fail(`expires after reset: ${where}`);
}

/**
 * Random sequences of requests with random costs (0 = peek, up to the limit) against the
 * rules of `cost`, on every step:
 *  - a request of cost c is allowed exactly when c requests of cost 1 would all be allowed
 *    now, and then leaves the very state those c requests leave;
 *  - a blocked request changes nothing, and its retryAfterMs is exact: the same request is
 *    blocked at now + retry − 1 and allowed at now + retry;
 *  - a 200 has `remaining` = how many requests of cost 1 would still be allowed now;
 *  - a peek is allowed when a request of cost 1 would be, with the same retry, `remaining`
 *    as the state stands, and it counts nothing.
 */
export function checkCostInvariants(t: Test, alg: Algorithm, seeds: number): void {
  let steps = 0;
  let blocked = 0;
  let peeks = 0;
  const completed = walkSequences(alg, seeds, 104729, 30, 0.4, (w) => {
    const { rnd, limit, D, now, state } = w;
    const u = rnd();
    const cost = u < 0.15 ? 0 : u < 0.35 ? 1 : u < 0.45 ? limit : 1 + Math.floor(rnd() * limit);
    const s = run(alg, state, limit, D, now, cost);
    steps++;
    const where = `seed ${w.seed} step ${w.step} (${alg.name}, limit ${limit}, cost ${cost}, D ${D})`;
    const admits = admitsNow(alg, state, limit, D, now);
    if (cost === 0) {
      peeks++;
      const one = run(alg, state, limit, D, now, 1);
      if (s.allowed !== one.allowed) return void t.fail(`peek allowed ${s.allowed}, cost 1 ${one.allowed}: ${where}`);
      if (s.allowed && s.remaining !== admits) return void t.fail(`peek remaining ${s.remaining} but ${admits} admitted: ${where}`);
      if (!s.allowed && (s.remaining !== 0 || s.retryAfterMs !== one.retryAfterMs)) return void t.fail(`peek retry differs from cost 1: ${where}`);
      if (state !== null && admits < limit) checkReset(t, alg, state, limit, D, now, s.resetMs, where);
      return true;
    }
    if (s.allowed !== admits >= cost) return void t.fail(`allowed ${s.allowed} with ${admits} admissible: ${where}`);
    if (s.allowed) {
      let sequential = state;
      for (let k = 0; k < cost; k++) sequential = apply(sequential, run(alg, sequential, limit, D, now));
      const after: LimitState = apply(state, s, cost)!;
      if (after.a !== sequential!.a || after.b !== sequential!.b || after.c !== sequential!.c) {
        return void t.fail(`state differs from ${cost} requests of cost 1: ${where}`);
      }
      const more = admitsNow(alg, after, limit, D, now);
      if (s.remaining !== more) return void t.fail(`remaining ${s.remaining} but ${more} more admitted: ${where}`);
      if (s.retryAfterMs !== 0) return void t.fail(`retry on allowed: ${where}`);
      checkReset(t, alg, after, limit, D, now, s.resetMs, where);
      w.state = after;
    } else {
      blocked++;
      const wrong = blockedProblem(alg, w, s, cost);
      if (wrong !== undefined) return void t.fail(`${wrong}: ${where}`);
    }
    return true;
  });
  if (completed) t.ok(blocked > steps / 20 && peeks > steps / 20, `${steps} steps with costs checked, ${blocked} blocked, ${peeks} peeks`);
}

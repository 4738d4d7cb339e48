import type { LimitKey, Sample } from "./load.js";

/**
 * Allowed beyond the limit, summed over keys, and the worst single key (window), in units of
 * the limit (a request of cost c is c of them): every allowed answer, and those allowed
 * without `degraded` alone. The invariant is on the second (docs/shares.md): a degraded
 * answer says it was not counted.
 */
export interface Over {
  overAdmitted: number;
  worst: number;
  undegraded: number;
  worstUndegraded: number;
}

/** What one fault cost, from the client's answers alone. */
export interface Tally {
  requests: number;
  fixedWindow: Over;
  tokenBucket: Over;
  /** how many keys each algorithm had (a row of keys shares answer has no token bucket) */
  keys: { fixedWindow: number; tokenBucket: number };
  degraded: number;
  /** answers other than 200/429 (5xx, 4xx) */
  unexpected: number;
  /** requests that failed or timed out at the client */
  failures: number;
  /**
   * Requests the owners counted although no exact answer admitted them: a fixed-window
   * count that climbs past the exact 200s seen for its window, up to the key's degraded
   * answers. A forward answered as degraded and counted later shows up here. A lower bound:
   * a count nobody read again is missed. (A count handed between skewed clocks also climbs
   * past its window's answers, since each node names windows by its own clock: the cap on
   * degraded answers keeps that out.)
   */
  countedWithoutExactAnswer: number;
}

/**
 * Over-admission is judged against each algorithm's own promise:
 * - fixed window: at most `limit` allowed per window. An exact answer names its window
 *   (`reset_time` is the window's end); a degraded one is placed by the client's clock.
 * - token bucket: a bucket that starts full allows at most `limit + limit × t / D` by time
 *   t after the key's first request. t runs from the first request's send to each answer's
 *   arrival, so timing between client and node can only loosen this bound, never tighten it.
 */
export function tally(samples: readonly Sample[], keys: readonly LimitKey[]): Tally {
  const t: Tally = {
    requests: samples.length,
    fixedWindow: noOver(),
    tokenBucket: noOver(),
    keys: { fixedWindow: 0, tokenBucket: 0 },
    degraded: 0,
    unexpected: 0,
    failures: 0,
    countedWithoutExactAnswer: 0,
  };
  const byKey = keys.map(() => [] as Sample[]);
  for (const s of samples) {
    byKey[s.key]!.push(s);
    if (s.degraded) t.degraded++;
    if (s.status === 0) t.failures++;
    else if (s.status !== 200 && s.status !== 429) t.unexpected++;
  }
  keys.forEach((key, k) => {
    const mine = byKey[k]!;
    if (key.algorithm === "fixed-window") fixedWindow(mine, key, t);
    else tokenBucket(mine, key, t);
    t.keys[key.algorithm === "fixed-window" ? "fixedWindow" : "tokenBucket"]++;
  });
  return t;
}

function noOver(): Over {
  return { overAdmitted: 0, worst: 0, undegraded: 0, worstUndegraded: 0 };
}

function addOver(o: Over, over: number, overUndegraded: number): void {
  o.overAdmitted += over;
  o.worst = Math.max(o.worst, over);
  o.undegraded += overUndegraded;
  o.worstUndegraded = Math.max(o.worstUndegraded, overUndegraded);
}

function fixedWindow(samples: readonly Sample[], key: LimitKey, t: Tally): void {
  const D = key.durationS;
  const cost = key.cost ?? 1;
  // Per window, in units of the limit: allowed, allowed exactly (not degraded), and the highest count an exact answer showed.
  const windows = new Map<number, { allowed: number; exact: number; maxCount: number }>();
  let degraded = 0;
  for (const s of samples) {
    if (s.status !== 200) continue;
    if (s.degraded) degraded += cost;
    const end = !s.degraded && s.resetTime !== undefined ? s.resetTime : (Math.floor(s.sentAt / 1000 / D) + 1) * D;
    let w = windows.get(end);
    if (w === undefined) windows.set(end, (w = { allowed: 0, exact: 0, maxCount: 0 }));
    w.allowed += cost;
    if (!s.degraded) {
      w.exact += cost;
      w.maxCount = Math.max(w.maxCount, s.count ?? 0);
    }
  }
  let climbed = 0;
  for (const w of windows.values()) {
    addOver(t.fixedWindow, Math.max(0, w.allowed - key.limit), Math.max(0, w.exact - key.limit));
    climbed += Math.max(0, w.maxCount - w.exact);
  }
  // In requests, as the degraded answers are counted. Not for keys that shares answer (load.ts).
  if (key.shared !== true) t.countedWithoutExactAnswer += Math.floor(Math.min(climbed, degraded) / cost);
}

function tokenBucket(samples: readonly Sample[], key: LimitKey, t: Tally): void {
  if (samples.length === 0) return;
  const first = Math.min(...samples.map((s) => s.sentAt));
  const cost = key.cost ?? 1;
  const overOf = (allowed: Sample[]): number => {
    let over = 0;
    allowed
      .sort((a, b) => a.doneAt - b.doneAt)
      .forEach((s, j) => {
        const bound = key.limit + Math.floor((key.limit * (s.doneAt - first)) / (key.durationS * 1000));
        over = Math.max(over, (j + 1) * cost - bound);
      });
    return over;
  };
  const allowed = samples.filter((s) => s.status === 200);
  addOver(t.tokenBucket, overOf(allowed), overOf(allowed.filter((s) => !s.degraded)));
}

/** First and last degraded answer, in ms after `from` (undefined when there was none). */
export function degradedSpan(samples: readonly Sample[], from: number): { first: number; last: number } | undefined {
  const at = samples.filter((s) => s.degraded && s.sentAt >= from).map((s) => s.sentAt - from);
  return at.length === 0 ? undefined : { first: Math.min(...at), last: Math.max(...at) };
}

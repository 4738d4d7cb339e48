import { ceilDiv, floorDiv } from "./integer.js";
import type { Algorithm, LimitState } from "./types.js";

/**
 * Capacity `limit`, starts full, refills continuously at limit/D tokens per second, a
 * request takes one token. Levels are kept in units of 1/D_ms of a token, so the refill
 * is exactly `limit` units per millisecond and one token is D_ms units: integers only.
 *
 * State: a = level (scaled tokens, may be negative after a merge: owed tokens),
 * b = time of that level (ms), c = the limit the level was last computed with.
 */
export const tokenBucket: Algorithm = {
  name: "token-bucket",
  code: 2,

  step(state, limit, D, now, out) {
    const capacity = limit * D;
    let level = capacity;
    if (state !== null) {
      // A lowered limit clamps the level to the new capacity; a raised one keeps it.
      level = Math.min(capacity, state.a + Math.max(0, now - state.b) * limit);
    }
    if (level >= D) {
      const after = level - D;
      out.allowed = true;
      out.remaining = floorDiv(after, D);
      out.retryAfterMs = 0;
      out.resetMs = now + ceilDiv(capacity - after, limit);
      out.a = after;
      out.b = now;
      out.c = limit;
    } else {
      out.allowed = false;
      out.remaining = 0;
      out.retryAfterMs = ceilDiv(D - level, limit);
      out.resetMs = now + ceilDiv(capacity - level, limit);
    }
  },

  merge(x, y, D, now, out) {
    // Each side's consumption (tokens taken and not yet refilled) is added up.
    const limit = x.b >= y.b ? x.c : y.c;
    const capacity = limit * D;
    const levelAt = (s: Readonly<LimitState>) => Math.min(capacity, s.a + Math.max(0, now - s.b) * limit);
    const consumed = capacity - levelAt(x) + (capacity - levelAt(y));
    out.a = capacity - consumed;
    out.b = now;
    out.c = limit;
  },

  expiresAt(state: Readonly<LimitState>, limit: number, D: number) {
    return state.b + ceilDiv(limit * D - state.a, limit);
  },
};

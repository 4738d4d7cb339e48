/**
 * A token bucket for frames that cost the server work and give the client nothing it could
 * not get more cheaply (PING, SETTINGS, PRIORITY, empty DATA, resets, refused streams): a
 * burst of `burst`, refilled at `perSecond`. Spent out: the connection is a flood
 * (CVE-2019-9512/9514/9515/9518, CVE-2023-44487) and ends in GOAWAY ENHANCE_YOUR_CALM. The
 * clock is passed in.
 */
export class FrameBudget {
  private tokens: number;
  private last: number;

  constructor(
    private readonly burst: number,
    private readonly perSecond: number,
    now: number,
  ) {
    this.tokens = burst;
    this.last = now;
  }

  /** Spends one token; false when none is left. */
  spend(now: number): boolean {
    if (this.tokens < 1) {
      const elapsed = now - this.last;
      if (elapsed > 0) {
        this.tokens = Math.min(this.burst, this.tokens + (elapsed * this.perSecond) / 1000);
        this.last = now;
      }
      if (this.tokens < 1) return false;
    }
    this.tokens--;
    return true;
  }
}

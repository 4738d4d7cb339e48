/**
 * When a peer client dials again after losing its connection: exponential back-off with
 * jitter, so a refusing or crashing peer is not hammered and a restarted cluster does not
 * reconnect in lockstep. A connection that came up, or a peer that went silent (it may be
 * behind a partition; backing off only delays seeing it heal), starts the series again.
 * `random` is passed in so the schedule is testable.
 */
export class ReconnectBackoff {
  private attempts = 0;

  constructor(
    private readonly minMs: number,
    private readonly maxMs: number,
    private readonly random: () => number = Math.random,
  ) {}

  /** The next attempt waits minMs again (about minMs / 2 after jitter). */
  reset(): void {
    this.attempts = 0;
  }

  /** The delay before the next attempt, in [base / 2, base) with base = minMs · 2^attempts capped at maxMs. */
  next(): number {
    const base = Math.min(this.maxMs, this.minMs * 2 ** this.attempts);
    this.attempts = Math.min(this.attempts + 1, 30);
    return base / 2 + (this.random() * base) / 2;
  }
}

/**
 * When a silent peer is suspected: the heartbeat failure detector of one connection. Pure:
 * the clock (performance.now() ms) and this node's own stalled time (loop-lag.ts) are
 * passed in.
 *
 * Two corrections over a fixed FAILURE_TIMEOUT_MS of silence:
 *  - A slow self is not a dead peer. While this node's event loop is starved, the peer's
 *    frames wait unread in the socket, and the silence timer fires first (timers run
 *    before I/O in a turn of the loop). So the silence charged to the peer is the time
 *    since its last frame MINUS the time this node's own loop stalled meanwhile: suspicion
 *    is extended by exactly the lag this node measured on itself.
 *  - Suspicion adapts to the measured spread of the heartbeats: the last SAMPLES gaps
 *    between PONGs (each net of this node's own stall) give a mean and a standard
 *    deviation, and a peer is suspected after mean + SPREAD_FACTOR × stddev of silence, or
 *    after PAUSE_MARGIN × the longest gap of the window if that is longer (pauses of a
 *    starved or collecting peer are a heavy tail that a normal model's stddev underrates:
 *    one 200 ms pause among 31 beats of 50 ms moves mean + 4 stddev only to ~190 ms, and
 *    the peer that paused and came back once is suspected the next time it does), held between FAILURE_TIMEOUT_MS (the floor) and CEILING_FACTOR × FAILURE_TIMEOUT_MS.
 *    The floor: a calm link (gaps ≈ HEARTBEAT_INTERVAL_MS, stddev ≈ 0) is judged exactly
 *    as the operator set it, never sooner, so the adaptation adds no false suspicion. The
 *    ceiling: a hung peer (SIGSTOP, a partition) on a jittery link still leaves the ring
 *    within a bounded time. mean + k·stddev rather than phi-accrual: with a normal model
 *    phi-accrual's threshold is the same kind of bound (phi 8 ≈ mean + 5.6 stddev), and
 *    this one reads as a time an operator can check against the logs.
 */
export const SAMPLES = 32;
export const SPREAD_FACTOR = 4;
export const CEILING_FACTOR = 4;
export const PAUSE_MARGIN = 1.5;
/** Gaps needed before the spread is trusted; until then the floor alone applies. */
export const MIN_SAMPLES = 4;

export class FailureDetector {
  private readonly gaps = new Float64Array(SAMPLES);
  private count = 0;
  private next = 0;
  private heardAt = 0;
  private heardStall = 0;
  private beatAt = NaN;
  private beatStall = 0;

  constructor(
    /** FAILURE_TIMEOUT_MS: never suspected sooner */
    readonly floorMs: number,
    readonly ceilingMs: number = floorMs * CEILING_FACTOR,
  ) {}

  /** A connection starts (or restarts): silence counts from now; the spread measured so far is kept. */
  reset(now: number, stalledMs: number): void {
    this.heard(now, stalledMs);
    this.beatAt = NaN;
  }

  /** A frame (any) arrived from the peer. */
  heard(now: number, stalledMs: number): void {
    this.heardAt = now;
    this.heardStall = stalledMs;
  }

  /** A heartbeat answer (PONG) arrived: one more gap for the spread. */
  beat(now: number, stalledMs: number): void {
    this.heard(now, stalledMs);
    if (!Number.isNaN(this.beatAt)) {
      this.gaps[this.next] = Math.max(0, now - this.beatAt - (stalledMs - this.beatStall));
      this.next = (this.next + 1) % SAMPLES;
      if (this.count < SAMPLES) this.count++;
    }
    this.beatAt = now;
    this.beatStall = stalledMs;
  }

  /** ms of silence after which the peer is suspected now (see above). */
  timeoutMs(): number {
    if (this.count < MIN_SAMPLES) return this.floorMs;
    let sum = 0;
    let longest = 0;
    for (let i = 0; i < this.count; i++) {
      sum += this.gaps[i]!;
      if (this.gaps[i]! > longest) longest = this.gaps[i]!;
    }
    const mean = sum / this.count;
    let sq = 0;
    for (let i = 0; i < this.count; i++) sq += (this.gaps[i]! - mean) ** 2;
    const bound = Math.max(mean + SPREAD_FACTOR * Math.sqrt(sq / this.count), PAUSE_MARGIN * longest);
    return Math.min(this.ceilingMs, Math.max(this.floorMs, bound));
  }

  /** Silence charged to the peer: since its last frame, less this node's own stall meanwhile. */
  silenceMs(now: number, stalledMs: number): number {
    return Math.max(0, now - this.heardAt - (stalledMs - this.heardStall));
  }

  /** ms since the peer's last frame (performance.now()), with no allowance for this node's own stalls. */
  sinceHeardMs(now: number): number {
    return now - this.heardAt;
  }

  /** ms until the peer is suspected; ≤ 0: suspected now. */
  remainingMs(now: number, stalledMs: number): number {
    return this.timeoutMs() - this.silenceMs(now, stalledMs);
  }
}

import { performance } from "node:perf_hooks";

/**
 * How long this process's event loop has been stalled in all: a timer that should tick every
 * TICK_MS adds whatever it came late by (beyond TOLERANCE_MS of ordinary jitter). The total
 * only grows, so "how much did I stall between t1 and t2" is a subtraction; stalledMs()
 * also counts the stall in progress (the tick that has not run yet), so a silence timer
 * that fires late in the same turn sees its own lateness. One timer per process (unref'd),
 * shared by every peer connection; the failure detector (failure-detector.ts) and the slow
 * peer detector read it so that a starved node does not blame its peers for its own lag.
 */
export const TICK_MS = 20;
export const TOLERANCE_MS = 2;
/** Stalls remembered for lagWithin (one per late tick; older ones are overwritten). */
const RECENT = 64;

export class LoopLag {
  private total = 0;
  private last: number;
  private timer: NodeJS.Timeout | undefined;
  private readonly recentAt = new Float64Array(RECENT);
  private readonly recentMs = new Float64Array(RECENT);
  private recentNext = 0;

  constructor(private readonly clock: () => number = () => performance.now()) {
    this.last = clock();
  }

  /** Start ticking (idempotent). */
  start(): this {
    if (this.timer === undefined) {
      this.last = this.clock();
      this.timer = setInterval(() => this.tick(this.clock()), TICK_MS);
      this.timer.unref();
    }
    return this;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** ms this loop has stalled since it started, the stall in progress at `now` included. */
  stalledMs(now: number = this.clock()): number {
    return this.total + excess(now - this.last);
  }

  /** The longest single stall that ended within `windowMs` before `now` (or is in progress). */
  lagWithin(now: number, windowMs: number): number {
    let worst = excess(now - this.last);
    for (let i = 0; i < RECENT; i++) if (now - this.recentAt[i]! <= windowMs && this.recentMs[i]! > worst) worst = this.recentMs[i]!;
    return worst;
  }

  /** One tick at `now` (the interval's; exposed for tests with their own clock). */
  tick(now: number): void {
    const late = excess(now - this.last);
    this.last = now;
    if (late === 0) return;
    this.total += late;
    this.recentAt[this.recentNext] = now;
    this.recentMs[this.recentNext] = late;
    this.recentNext = (this.recentNext + 1) % RECENT;
  }
}

function excess(sinceLastTick: number): number {
  const late = sinceLastTick - TICK_MS;
  return late > TOLERANCE_MS ? late : 0;
}

/** The process's loop, started by the first peer client. */
export const processLoopLag = new LoopLag();

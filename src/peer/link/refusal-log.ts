// Connections refused before authentication are counted by reason and logged
// as one summary per interval: anyone can open a peer port, and a line per
// refusal let a flood write ~14,600 warnings per node in 25 s.

import type { PeerLogger } from "../logger.js";

/** Seconds between summaries while refusals keep coming. */
export const REFUSAL_LOG_INTERVAL_MS = 10_000;

export class RefusalLog {
  /** Refusals since the server started, by reason (for tests and metrics). */
  readonly totals = new Map<string, number>();
  private readonly window = new Map<string, number>();
  private readonly sources = new Set<string>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly log: PeerLogger,
    private readonly intervalMs = REFUSAL_LOG_INTERVAL_MS,
  ) {}

  /** Count one refusal; the first of an interval arms the summary. */
  note(reason: string, source: string | undefined): void {
    this.totals.set(reason, (this.totals.get(reason) ?? 0) + 1);
    this.window.set(reason, (this.window.get(reason) ?? 0) + 1);
    // A few sample sources are enough to aim a firewall rule; more would grow with the flood.
    if (source !== undefined && this.sources.size < 8) this.sources.add(source);
    if (this.timer === undefined) {
      this.timer = setTimeout(() => this.flush(), this.intervalMs);
      this.timer.unref();
    }
  }

  total(reason: string): number {
    return this.totals.get(reason) ?? 0;
  }

  /** Log what the interval saw, if anything, and start a new one. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.window.size === 0) return;
    this.log.warn(
      { refused: Object.fromEntries(this.window), sources: [...this.sources], seconds: this.intervalMs / 1000 },
      "peer connections refused (summary of the interval)",
    );
    this.window.clear();
    this.sources.clear();
  }

  stop(): void {
    this.flush();
  }
}

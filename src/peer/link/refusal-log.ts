// Connections refused before authentication are counted by reason and logged
// as one summary per interval: anyone can open a peer port, and a line per
// refusal let a flood write ~14,600 warnings per node in 25 s.

import type { PeerLogger } from "../logger.js";
import { HandshakeError } from "./handshake.js";

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

/** What an operator should check, by the reason a handshake was refused. */
const REFUSAL_HINTS: Record<string, string> = {
  bad_proof: "peer handshake refused: the proof does not match this node's CLUSTER_SECRET; every member needs the same CLUSTER_SECRET",
  wrong_node: "peer handshake refused: another node answers at this member's address (check PEERS and NODE_ID)",
};

/**
 * One peer client's refused handshakes (a wrong CLUSTER_SECRET on either side, another node
 * at the address). A refusal does not fix itself between back-off steps, so it is logged in
 * one line without a stack when first seen or when its reason changes, then at most once per
 * interval with the attempts since: before, each attempt logged the error with its stack on
 * both sides (28 entries of ~1.2 kB in 10 s).
 */
export class PeerRefusals {
  /** the reason of the last refused handshake, until one succeeds (read by readiness) */
  reason: string | undefined;
  private attempts = 0;
  private loggedAt = -Infinity;
  private loggedReason: string | undefined;

  constructor(
    private readonly log: PeerLogger,
    private readonly peer: string,
    private readonly intervalMs = REFUSAL_LOG_INTERVAL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether `err` is a refused handshake (then counted and logged here, bounded). */
  noted(err: unknown): boolean {
    if (!(err instanceof HandshakeError)) return false;
    this.refused(err.reason, err.message);
    return true;
  }

  /** told when `reason` changes (set by whoever reads it: the member pool's readiness) */
  onChange: (() => void) | undefined;

  refused(reason: string, message: string): void {
    const changed = reason !== this.reason;
    this.reason = reason;
    if (changed) this.onChange?.();
    this.attempts++;
    const at = this.now();
    if (reason === this.loggedReason && at - this.loggedAt < this.intervalMs) return;
    this.log.warn({ peer: this.peer, reason, detail: message, attempts: this.attempts }, REFUSAL_HINTS[reason] ?? "peer handshake refused");
    this.loggedAt = at;
    this.loggedReason = reason;
    this.attempts = 0;
  }

  /** A handshake succeeded: said once if a refusal was logged. */
  accepted(): void {
    if (this.reason === undefined) return;
    if (this.loggedReason !== undefined) this.log.info({ peer: this.peer }, "peer handshake accepted again");
    this.reason = this.loggedReason = undefined;
    this.attempts = 0;
    this.loggedAt = -Infinity;
    this.onChange?.();
  }
}

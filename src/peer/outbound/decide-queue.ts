// The hot path of one peer connection: every decide() of an event-loop turn goes out in
// one DECIDE batch carrying its deadline budget, the waiters are kept in a ring, and one
// timer per connection expires them (PeerClient owns the connection around it).

import { performance } from "node:perf_hooks";
import { DecideCode, DecideItemFlag } from "../wire/constants.js";
import { TIMEOUT_ERROR, type PeerError } from "../errors.js";
import { ForwardBudget } from "./forward-budget.js";
import { DecideBatchWriter, newDecideResult, type DecideQuery, type DecideResult } from "../wire/messages.js";
import type { DecideReplySink } from "../wire/decide-reply.js";
import { PendingRequests, invokeSafely, type DecideCallback } from "./pending-requests.js";

export class DecideQueue {
  /** What the link costs, from heartbeats and time-outs (the connection feeds it its PINGs and PONGs). */
  readonly budget = new ForwardBudget();
  /** Answers "allowed" that came back after their waiter had timed out: counted by the peer, answered `degraded` here. */
  lateAllowed = 0;

  private readonly batch = new DecideBatchWriter();
  private readonly pending = new PendingRequests();
  private flushScheduled = false;
  private turnStart = 0;
  private deadlineTimer: NodeJS.Timeout | null = null;
  // Handed to every callback; see PeerClient.decide().
  private readonly result: DecideResult = newDecideResult();

  // Bound once, not per call.
  private readonly flushBound = (): void => this.flush();
  private readonly onDeadlineBound = (): void => this.onDeadline();
  /** Hand to readDecideReply: one call per answered item, plain numbers, nothing allocated. */
  readonly onReplyItem: DecideReplySink = (reqId, code, remaining, resetTime, retryAfterMs, flags, limit, duration, algorithm, granted, grantWindowStart) => {
    const cb = this.pending.take(reqId);
    // Expired (or an id we never sent: a peer that does so is broken anyway).
    if (cb === null) {
      if (code === DecideCode.ALLOWED) this.lateAllowed++;
      return;
    }
    this.budget.onAnswer(this.pending.takenDeadline - this.timeoutMs);
    const r = this.result;
    r.code = code;
    r.remaining = remaining;
    r.resetTime = resetTime;
    r.retryAfterMs = retryAfterMs;
    r.flags = flags;
    r.limit = limit;
    r.duration = duration;
    r.algorithm = algorithm;
    r.granted = granted;
    r.grantWindowStart = grantWindowStart;
    invokeSafely(cb, null, r);
  };

  /**
   * `write`: send this turn's frames, if the connection is still there (when it is not,
   * failAll has already answered their waiters). `probe`: send a heartbeat now.
   */
  constructor(
    private readonly timeoutMs: number,
    private readonly write: (frames: Buffer) => void,
    private readonly probe: () => void,
  ) {}

  /** Decisions waiting for an answer (including this turn's unsent batch). */
  get waiting(): number {
    return this.pending.waiting;
  }

  /** Queue one decision for this turn's batch; false (nothing queued) when it cannot be encoded. `itemFlags`: DecideItemFlag bits beside OVERRIDABLE (OPENING). */
  add(q: DecideQuery, cb: DecideCallback, itemFlags: number): boolean {
    let flags = itemFlags | (q.overridable === true ? DecideItemFlag.OVERRIDABLE : 0);
    if (q.charge === true) flags |= DecideItemFlag.CHARGE | (q.cost < 0 ? DecideItemFlag.REFUND : 0);
    const chargeId = q.charge === true ? q.chargeId : undefined;
    if (!this.batch.add(this.pending.nextId, q.algorithm.code, q.limit, q.duration, q.namespace, q.identifier, Math.abs(q.cost), flags, chargeId)) return false;
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      // One clock read per turn: the whole batch shares a deadline, counted
      // from the turn's first request (so no request waits longer than timeoutMs).
      this.turnStart = performance.now();
      setImmediate(this.flushBound);
    }
    this.pending.add(cb, this.turnStart + this.timeoutMs);
    if (this.deadlineTimer === null) this.deadlineTimer = setTimeout(this.onDeadlineBound, this.timeoutMs);
    return true;
  }

  /** Answer every waiter with `err`, and drop the unsent batch so the peer never decides what was already answered. */
  failAll(err: PeerError): void {
    this.batch.reset();
    this.pending.failAll(err);
  }

  /** No more deadlines (after failAll, for good). */
  stop(): void {
    if (this.deadlineTimer !== null) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = null;
  }

  private flush(): void {
    this.flushScheduled = false;
    const frames = this.batch.take(this.budget.budgetUs(this.turnStart + this.timeoutMs, performance.now()));
    if (frames !== null) this.write(frames);
  }

  private onDeadline(): void {
    this.deadlineTimer = null;
    const now = performance.now();
    const expired = this.pending.expired;
    // +1: timers may fire a fraction of a millisecond early by this clock.
    const next = this.pending.expire(now + 1, TIMEOUT_ERROR);
    if (this.pending.expired !== expired) {
      this.budget.onTimeout(now - this.timeoutMs);
      // Probe the link, unless a heartbeat is on its way already (its age measures it).
      if (this.budget.quiet) this.probe();
    }
    if (next !== Infinity && this.deadlineTimer === null) {
      this.deadlineTimer = setTimeout(this.onDeadlineBound, Math.max(1, next - now));
    }
  }
}

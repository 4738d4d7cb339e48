// The hot path of one peer connection: every decide() of an event-loop turn goes out in
// one DECIDE batch carrying its deadline budget, the waiters are kept in a ring, and one
// timer per connection expires them (PeerClient owns the connection around it). While
// MAX_DECIDE_FRAMES_IN_FLIGHT frames are unanswered, the turns' forwards gather into one
// batch that leaves at the end of the turn an answer (or a deadline) frees the link: a
// frame's fixed cost (a write and a read, two tags, a reply write on the owner) is paid per
// round trip, not per turn, once a link is busy. Never on a timer of its own, and no wait
// at all while fewer frames are on their way.

import { performance } from "node:perf_hooks";
import { DecideCode, DecideItemFlag, MAX_DECIDE_FRAMES_IN_FLIGHT } from "../wire/constants.js";
import { TIMEOUT_ERROR, type PeerError } from "../errors.js";
import { ForwardBudget } from "./forward-budget.js";
import { DecideBatchWriter, newDecideResult, type DecideQuery, type DecideResult } from "../wire/messages.js";
import { readDecideReply, type DecideReplySink } from "../wire/decide-reply.js";
import { PendingRequests, invokeSafely, type DecideCallback } from "./pending-requests.js";

export class DecideQueue {
  /** What the link costs, from heartbeats and time-outs (the connection feeds it its PINGs and PONGs). */
  readonly budget = new ForwardBudget();
  /** Answers "allowed" that came back after their waiter had timed out: counted by the peer, answered `degraded` here. */
  lateAllowed = 0;

  private readonly batch = new DecideBatchWriter();
  private readonly pending = new PendingRequests();
  private readonly inFlight = new FramesInFlight();
  private readonly sends = new SendTimes();
  /**
   * performance.now() when the answer being handed to a callback left in its frame (a held
   * batch leaves later than its requests were made); NaN when no longer known. Valid inside the callback.
   */
  answerSentAt = NaN;
  private flushScheduled = false;
  private turnStart = 0;
  /** Deadline of the unsent batch's first waiter, which its frames' budget is counted against. */
  private batchDeadline = 0;
  /** Deadline of the unsent batch's last waiter: the frame is done with once it has passed. */
  private lastDeadline = 0;
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
    this.answerSentAt = this.sends.of(reqId);
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
    invokeSafely(cb, null, r, this.pending.takenCtx);
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
  add(q: DecideQuery, cb: DecideCallback, itemFlags: number, ctx: unknown): boolean {
    let flags = itemFlags | (q.overridable === true ? DecideItemFlag.OVERRIDABLE : 0);
    if (q.charge === true) flags |= DecideItemFlag.CHARGE | (q.cost < 0 ? DecideItemFlag.REFUND : 0);
    const chargeId = q.charge === true ? q.chargeId : undefined;
    if (!this.batch.add(this.pending.nextId, q.algorithm.code, q.limit, q.duration, q.namespace, q.identifier, Math.abs(q.cost), flags, chargeId)) return false;
    if (!this.flushScheduled) this.scheduleFlush();
    // Deadlines never decrease (PendingRequests): turnStart only grows.
    const deadline = this.turnStart + this.timeoutMs;
    if (this.batch.count === 1) this.batchDeadline = deadline;
    this.lastDeadline = deadline;
    this.pending.add(cb, deadline, ctx);
    if (this.deadlineTimer === null) this.deadlineTimer = setTimeout(this.onDeadlineBound, this.timeoutMs);
    return true;
  }

  /** Answer every waiter with `err`, and drop the unsent batch so the peer never decides what was already answered. */
  failAll(err: PeerError): void {
    this.batch.reset();
    this.inFlight.clear();
    this.sends.clear();
    this.pending.failAll(err);
  }

  /** A DECIDE_REPLY's body: its items answered, and a batch held for it leaves at the end of this turn. */
  onReply(body: Buffer): void {
    readDecideReply(body, this.onReplyItem);
    this.inFlight.answered();
    if (this.batch.count > 0 && !this.flushScheduled) this.scheduleFlush();
  }

  /** No more deadlines (after failAll, for good). */
  stop(): void {
    if (this.deadlineTimer !== null) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = null;
  }

  /**
   * Flush at the end of this turn. One clock read per turn: the turn's requests share a
   * deadline counted from its first (so no request waits longer than timeoutMs).
   */
  private scheduleFlush(): void {
    this.flushScheduled = true;
    this.turnStart = performance.now();
    setImmediate(this.flushBound);
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.batch.count === 0) return;
    const now = performance.now();
    // Held: onReply or onDeadline (a frame's waiters all gave up) schedules the next flush.
    // +1: timers may fire a fraction of a millisecond early by this clock (as in onDeadline).
    if (this.inFlight.count(now + 1) >= MAX_DECIDE_FRAMES_IN_FLIGHT) return;
    // The budget of the batch's first waiter, the shortest: a held batch spans turns.
    const frames = this.batch.take(this.budget.budgetUs(this.batchDeadline, now));
    if (frames === null) return;
    for (let i = 0; i < this.batch.framesTaken; i++) this.inFlight.sent(this.lastDeadline);
    this.sends.sent(this.pending.nextId, now);
    this.write(frames);
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
    // A frame whose waiters have all given up holds nothing back any more (an owner drops an
    // expired frame unanswered: its answer may never come).
    if (this.batch.count > 0 && !this.flushScheduled) this.scheduleFlush();
  }
}

/** Size of the ring of unanswered frames; beyond it the oldest is forgotten (counted as answered). */
const FRAMES_RING = 32;

/**
 * The DECIDE frames of one connection still unanswered, oldest first, each with the deadline of
 * its last waiter. DECIDE_REPLYs come in the order of their frames, one each; a frame its owner
 * dropped (budget spent) gets none, so a frame also stops counting once its deadline has
 * passed, and a later reply that takes an older frame's place only makes the count right sooner.
 */
class FramesInFlight {
  private readonly deadlines = new Float64Array(FRAMES_RING);
  private head = 0;
  private n = 0;

  sent(lastDeadline: number): void {
    if (this.n === FRAMES_RING) this.answered();
    this.deadlines[(this.head + this.n) % FRAMES_RING] = lastDeadline;
    this.n++;
  }

  answered(): void {
    if (this.n === 0) return;
    this.head = (this.head + 1) % FRAMES_RING;
    this.n--;
  }

  /** Frames unanswered whose waiters may still be waiting at `now`. */
  count(now: number): number {
    while (this.n > 0 && this.deadlines[this.head]! <= now) this.answered();
    return this.n;
  }

  clear(): void {
    this.head = this.n = 0;
  }
}

/**
 * When each batch left: `[endId, at]` per take(), ids below endId (u32, consecutive) in it.
 * Answers come in the order sent, so a send whose ids are all below an answered id is done
 * with. Beyond the ring the oldest is forgotten, and its answers' send time is unknown (NaN).
 */
class SendTimes {
  private readonly endIds = new Uint32Array(FRAMES_RING);
  private readonly at = new Float64Array(FRAMES_RING);
  private head = 0;
  private n = 0;

  sent(endId: number, at: number): void {
    if (this.n === FRAMES_RING) this.drop();
    const i = (this.head + this.n) % FRAMES_RING;
    this.endIds[i] = endId;
    this.at[i] = at;
    this.n++;
  }

  /** When the batch holding `reqId` left; NaN when forgotten. */
  of(reqId: number): number {
    // The id is below the send's end when (end - id) as a u32 is 1..2^31-1 (wrap-around included).
    while (this.n > 0 && (((this.endIds[this.head]! - reqId) >>> 0) - 1) >>> 0 >= 0x7fff_ffff) this.drop();
    return this.n === 0 ? NaN : this.at[this.head]!;
  }

  clear(): void {
    this.head = this.n = 0;
  }

  private drop(): void {
    this.head = (this.head + 1) % FRAMES_RING;
    this.n--;
  }
}

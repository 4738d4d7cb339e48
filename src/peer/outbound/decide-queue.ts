// The hot path of one peer connection: every decide() of an event-loop turn goes out in
// one DECIDE batch carrying its deadline budget, the waiters are kept in a ring, and one
// timer per connection expires them (PeerClient owns the connection around it). While
// MAX_DECIDE_WRITES_IN_FLIGHT writes of frames are unanswered, the turns' forwards wait in one
// frame and leave in one write at the end of the turn an answer (or a deadline) frees the
// link: the write, the owner's read, the tags and its reply are paid per round trip, not per
// turn, once a link is busy. The waiting turns share the budget of the first (the earliest
// deadline). Never on a timer of its own, and no wait at all while fewer writes are on their way.

import { performance } from "node:perf_hooks";
import { DecideCode, DecideItemFlag, MAX_DECIDE_WRITES_IN_FLIGHT } from "../wire/constants.js";
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
  private readonly inFlight = new WritesInFlight();
  private readonly sends = new SendTimes();
  /**
   * performance.now() when the answer being handed to a callback left in its frame (a held
   * batch leaves later than its requests were made); NaN when no longer known. Valid inside the callback.
   */
  answerSentAt = NaN;
  private flushScheduled = false;
  /** Whether this turn's requests have their frame (startFrame) yet. */
  private turnFramed = false;
  private turnStart = 0;
  /** Deadline of the unsent batch's last waiter: its write is done with once it has passed. */
  private lastDeadline = 0;
  /** The budget of one frame of the unsent batch, from its deadline (its turn's), at the flush. */
  private flushNow = 0;
  /** This turn's deadline (its frame's), while it has one. */
  private turnDeadline = 0;
  /**
   * The frames held at their turn's end: deadline, the budget they would have left with then, and
   * when. Waiting never raises a frame's budget: the link may have shown itself better since (a
   * PONG), but a frame held is no later than one sent, so it gets at most what it had then, less the wait.
   */
  private readonly held: number[] = [];
  private readonly budgetOf = (deadline: number): number => {
    let us = this.budget.budgetUs(deadline, this.flushNow);
    const held = this.held;
    for (let i = 0; i < held.length; i += 3) {
      if (held[i] !== deadline) continue;
      const then = held[i + 1]! - (this.flushNow - held[i + 2]!) * 1000;
      if (then < us) us = then > 0 ? then : 0;
    }
    return us;
  };
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
    if (!this.flushScheduled) this.scheduleFlush();
    // Deadlines never decrease (PendingRequests): turnStart only grows.
    const deadline = this.turnStart + this.timeoutMs;
    if (!this.turnFramed) {
      this.turnFramed = true;
      if (this.batch.count === 0) {
        this.batch.startFrame(deadline);
        this.turnDeadline = deadline;
      }
      // Else a frame is held for an answer: this turn's items join it, under the budget of its
      // first turn (the earliest deadline, so no item is decided after its waiter gave up). One
      // frame per write, not one per turn: one tag each way and one DECIDE_REPLY, whatever
      // number of turns waited (at saturation a write carried ~1.4 frames of ~2.8 decisions).
    }
    if (!this.batch.add(this.pending.nextId, q.algorithm.code, q.limit, q.duration, q.namespace, q.identifier, Math.abs(q.cost), flags, chargeId)) return false;
    this.lastDeadline = deadline;
    this.pending.add(cb, deadline, ctx);
    if (this.deadlineTimer === null) this.deadlineTimer = setTimeout(this.onDeadlineBound, this.timeoutMs);
    return true;
  }

  /** Answer every waiter with `err`, and drop the unsent batch so the peer never decides what was already answered. */
  failAll(err: PeerError): void {
    this.batch.reset();
    this.held.length = 0;
    this.inFlight.clear();
    this.sends.clear();
    this.pending.failAll(err);
  }

  /** A DECIDE_REPLY's body: its items answered, and a batch held for it leaves at the end of this turn. */
  onReply(body: Buffer): void {
    readDecideReply(body, this.onReplyItem);
    this.inFlight.answeredFrame();
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
    this.turnFramed = false;
    this.turnStart = performance.now();
    setImmediate(this.flushBound);
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.batch.count === 0) return;
    const now = performance.now();
    // Held: onReply or onDeadline (a write's waiters all gave up) schedules the next flush.
    // +1: timers may fire a fraction of a millisecond early by this clock (as in onDeadline).
    if (this.inFlight.count(now + 1) >= MAX_DECIDE_WRITES_IN_FLIGHT) {
      // Once per frame: a turn that joined the held frame has its first turn's deadline, and
      // the budget the frame had then, less the wait, is no more than it has now.
      const held = this.held;
      if (this.turnFramed && (held.length === 0 || held[held.length - 3] !== this.turnDeadline))
        held.push(this.turnDeadline, this.budget.budgetUs(this.turnDeadline, now), now);
      this.turnFramed = false;
      return;
    }
    this.flushNow = now;
    const frames = this.batch.take(this.budgetOf);
    this.held.length = 0;
    if (frames === null) return;
    this.inFlight.sent(this.batch.framesTaken, this.lastDeadline);
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
    // A write whose waiters have all given up holds nothing back any more (an owner drops an
    // expired frame unanswered: its answer may never come).
    if (this.batch.count > 0 && !this.flushScheduled) this.scheduleFlush();
  }
}

/** Size of the rings of unanswered writes; beyond it the oldest is forgotten (counted as answered). */
const FRAMES_RING = 32;

/**
 * A fixed ring of (u32, f64) pairs, oldest first, in typed arrays (no allocation per write):
 * what both records below keep. Pushing onto a full ring forgets the oldest.
 */
class PairRing {
  protected readonly u = new Uint32Array(FRAMES_RING);
  protected readonly f = new Float64Array(FRAMES_RING);
  protected head = 0;
  protected n = 0;

  protected push(u: number, f: number): void {
    if (this.n === FRAMES_RING) this.drop();
    const i = (this.head + this.n) % FRAMES_RING;
    this.u[i] = u;
    this.f[i] = f;
    this.n++;
  }

  clear(): void {
    this.head = this.n = 0;
  }

  protected drop(): void {
    this.head = (this.head + 1) % FRAMES_RING;
    this.n--;
  }
}

/**
 * The writes of DECIDE frames of one connection still unanswered, oldest first: how many of
 * its frames are unanswered (u), and the deadline of its last waiter (f). DECIDE_REPLYs come in
 * the order of their frames, one each; a frame its owner dropped (budget spent) gets none, so a
 * write also stops counting once its deadline has passed, and a later reply that takes an
 * older frame's place only makes the count right sooner.
 */
class WritesInFlight extends PairRing {
  sent(frames: number, lastDeadline: number): void {
    this.push(frames, lastDeadline);
  }

  answeredFrame(): void {
    if (this.n > 0 && --this.u[this.head]! === 0) this.drop();
  }

  /** Writes unanswered whose waiters may still be waiting at `now`. */
  count(now: number): number {
    while (this.n > 0 && this.f[this.head]! <= now) this.drop();
    return this.n;
  }
}

/**
 * When each batch left: `[endId (u), at (f)]` per take(), ids below endId (u32, consecutive) in
 * it. Answers come in the order sent, so a send whose ids are all below an answered id is done
 * with. Beyond the ring the oldest is forgotten, and its answers' send time is unknown (NaN).
 */
class SendTimes extends PairRing {
  sent(endId: number, at: number): void {
    this.push(endId, at);
  }

  /** When the batch holding `reqId` left; NaN when forgotten. */
  of(reqId: number): number {
    // The id is below the send's end when (end - id) as a u32 is 1..2^31-1 (wrap-around included).
    while (this.n > 0 && (((this.u[this.head]! - reqId) >>> 0) - 1) >>> 0 >= 0x7fff_ffff) this.drop();
    return this.n === 0 ? NaN : this.f[this.head]!;
  }
}

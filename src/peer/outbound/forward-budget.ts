// The deadline budget a DECIDE frame carries (docs/peer-protocol.md, "Deadline budget"):
// how long after receiving the frame its owner may still decide the items so that the
// answers reach the sender before it gives up on them and answers `degraded`. Relative
// (µs), so the two clocks never meet; the owner measures it on its monotonic clock.

import { NO_BUDGET } from "../wire/constants.js";

/** Heartbeats remembered while unanswered; older ones are forgotten (the connection is dropped long before). */
const MAX_UNANSWERED_PINGS = 16;

/**
 * One connection's estimate of what a forward costs on the wire, turned into budgets.
 *
 * The owner cannot see time spent on the wire, so the sender takes it off the budget: a
 * whole round trip (the request's leg, and the answer's, which must also arrive in time).
 * The round trip is the larger of
 *  - the smaller of the last two heartbeat round trips (one late PONG, a GC pause, does
 *    not cost a heartbeat interval of forwards), and
 *  - the age of the oldest request still unanswered: a link that has just turned slow shows
 *    there first, long before a slow round trip completes. That is the oldest heartbeat on
 *    its way, or a forward that timed out, until something sent after it comes back: a
 *    PONG, or a forward answered in time. (A time-out is no evidence when a heartbeat sent
 *    after that forward has already come back: the link delivered, the delay was elsewhere.)
 *    A time-out sends a heartbeat at once when none is on its way, to probe the link.
 * PING/PONG share the connection, and its queues, with DECIDE.
 */
export class ForwardBudget {
  private rtt = NaN;
  private previousRtt = NaN;
  /** Send times (performance.now()) of unanswered PINGs, oldest first, in a ring. */
  private readonly pings = new Float64Array(MAX_UNANSWERED_PINGS);
  private head = 0;
  private unanswered = 0;
  /** Send time of the oldest timed-out forward not yet followed by an answer to something sent later; -1: none. */
  private lateSince = -1;
  /** Send time of the PING the last PONG answered. */
  private lastEcho = -Infinity;

  /** True when no heartbeat is on its way: a time-out should send one to probe the link. */
  get quiet(): boolean {
    return this.unanswered === 0;
  }

  onPingSent(at: number): void {
    if (this.unanswered === MAX_UNANSWERED_PINGS) {
      this.head = (this.head + 1) % MAX_UNANSWERED_PINGS;
      this.unanswered--;
    }
    this.pings[(this.head + this.unanswered) % MAX_UNANSWERED_PINGS] = at;
    this.unanswered++;
  }

  /** The PING sent at `sentAt` came back after `ms`; PONGs come in order, so every earlier one is answered too. */
  onRoundTrip(ms: number, sentAt: number): void {
    // The first answer to a heartbeat sent since a time-out replaces the older samples: a
    // round trip from before a link turned slow must not keep its budgets up.
    const afterTimeout = this.lateSince >= 0 && sentAt >= this.lateSince;
    this.previousRtt = afterTimeout ? ms : this.rtt;
    this.rtt = ms;
    this.lastEcho = sentAt;
    if (afterTimeout) this.lateSince = -1;
    while (this.unanswered > 0 && this.pings[this.head]! <= sentAt) {
      this.head = (this.head + 1) % MAX_UNANSWERED_PINGS;
      this.unanswered--;
    }
  }

  /** A forward sent at `sentAt` timed out. */
  onTimeout(sentAt: number): void {
    if (this.lastEcho < sentAt && this.lateSince < 0) this.lateSince = sentAt;
  }

  /** A forward sent at `sentAt` was answered in time. */
  onAnswer(sentAt: number): void {
    if (sentAt >= this.lateSince) this.lateSince = -1;
  }

  /** A new connection: nothing measured on the old one holds. */
  reset(): void {
    this.rtt = this.previousRtt = NaN;
    this.head = this.unanswered = 0;
    this.lateSince = -1;
    this.lastEcho = -Infinity;
  }

  /** Budget (µs) of a batch sent at `now` whose waiters give up at `deadline` (both performance.now() ms). */
  budgetUs(deadline: number, now: number): number {
    // NaN (not measured yet) compares false: nothing is taken off.
    const last = this.rtt > 0 ? this.rtt : 0;
    const before = this.previousRtt > 0 ? this.previousRtt : last;
    let trip = last < before ? last : before;
    let oldest = this.unanswered > 0 ? this.pings[this.head]! : now;
    if (this.lateSince >= 0 && this.lateSince < oldest) oldest = this.lateSince;
    if (now - oldest > trip) trip = now - oldest;
    const ms = deadline - now - trip;
    if (!(ms > 0)) return 0;
    const us = ms * 1000;
    return us < NO_BUDGET ? Math.floor(us) : NO_BUDGET - 1;
  }
}

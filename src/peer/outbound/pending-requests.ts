// The waiters of one connection's in-flight decisions.
//
// Request ids are handed out consecutively and requests are sent in the
// order they were made, each with the same timeout, so deadlines only grow:
// the waiters form a FIFO window [head, tail) of ids in a power-of-two ring,
// and the earliest deadline is always at the head. That gives O(1) lookup by
// reqId without a Map, and lets ONE timer per connection, re-armed to the
// head's deadline, expire requests (undici's "one array split by indices",
// not a promise per request).

import type { DecideResult } from "../wire/messages.js";
import type { PeerError } from "../errors.js";

/**
 * `ctx`: what the caller handed to decide() beside the callback, given back with the answer,
 * so that one callback bound once can serve every request (no closure per request).
 */
export type DecideCallback = (err: PeerError | null, result: DecideResult | null, ctx: unknown) => void;

/**
 * Run a waiter's callback so that a throw in one caller's code can neither
 * leave the other waiters of a batch unanswered nor break the connection:
 * the error is rethrown on its own tick, where it surfaces as uncaught.
 */
export function invokeSafely(cb: DecideCallback, err: PeerError | null, result: DecideResult | null, ctx: unknown): void {
  try {
    cb(err, result, ctx);
  } catch (thrown) {
    process.nextTick(() => {
      throw thrown;
    });
  }
}

export class PendingRequests {
  private cbs: Array<DecideCallback | null>;
  private ctxs: unknown[];
  private deadlines: Float64Array;
  private mask: number;
  /** Oldest id that may still be waiting. */
  private head = 0;
  /** Next id to hand out. */
  private tail = 0;
  /** Waiters not yet answered (the window also holds answered slots until the head passes them). */
  waiting = 0;
  /** Waiters answered by expire(), ever. */
  expired = 0;
  /** Deadline of the waiter the last successful take() returned. */
  takenDeadline = 0;
  /** The ctx of the waiter the last successful take() returned. */
  takenCtx: unknown = undefined;

  /** `firstId` only matters to tests of the u32 wrap-around. */
  constructor(initialCapacity = 1024, firstId = 0) {
    this.head = this.tail = firstId >>> 0;
    let cap = 16;
    while (cap < initialCapacity) cap *= 2;
    this.cbs = new Array<DecideCallback | null>(cap).fill(null);
    this.ctxs = new Array<unknown>(cap).fill(undefined);
    this.deadlines = new Float64Array(cap);
    this.mask = cap - 1;
  }

  /** Ids in the window, answered or not. */
  get size(): number {
    return (this.tail - this.head) >>> 0;
  }

  /** The id the next add() will use. */
  get nextId(): number {
    return this.tail;
  }

  /** Deadline of the oldest waiter, or Infinity when none waits. */
  get headDeadline(): number {
    this.skipAnswered();
    return this.size === 0 ? Infinity : this.deadlines[this.head & this.mask]!;
  }

  /** Register a waiter; returns its reqId. Deadlines must not decrease. */
  add(cb: DecideCallback, deadline: number, ctx?: unknown): number {
    if (this.size > this.mask) {
      this.skipAnswered();
      if (this.size > this.mask) this.grow();
    }
    const id = this.tail;
    const i = id & this.mask;
    this.cbs[i] = cb;
    this.ctxs[i] = ctx;
    this.deadlines[i] = deadline;
    this.tail = (id + 1) >>> 0;
    this.waiting++;
    return id;
  }

  /** Take the waiter of `reqId`, or null for an id not waiting (unknown, answered or expired). */
  take(reqId: number): DecideCallback | null {
    if ((reqId - this.head) >>> 0 >= this.size) return null;
    const i = reqId & this.mask;
    const cb = this.cbs[i]!;
    if (cb === null) return null;
    this.cbs[i] = null;
    this.takenCtx = this.ctxs[i];
    this.ctxs[i] = undefined;
    this.waiting--;
    this.takenDeadline = this.deadlines[i]!;
    return cb;
  }

  /**
   * Answer with `err` every waiter whose deadline is <= `now`, oldest first;
   * returns the next deadline (Infinity when none waits). Callbacks may add
   * new waiters: those have later deadlines and stop the loop.
   */
  expire(now: number, err: PeerError): number {
    for (;;) {
      this.skipAnswered();
      if (this.size === 0) return Infinity;
      const i = this.head & this.mask;
      const deadline = this.deadlines[i]!;
      if (deadline > now) return deadline;
      const cb = this.cbs[i]!;
      const ctx = this.ctxs[i];
      this.cbs[i] = null;
      this.ctxs[i] = undefined;
      this.head = (this.head + 1) >>> 0;
      this.waiting--;
      this.expired++;
      invokeSafely(cb, err, null, ctx);
    }
  }

  /** Answer every waiter with `err` (connection lost). Waiters added by the callbacks are kept. */
  failAll(err: PeerError): void {
    const end = this.tail;
    while (this.head !== end) {
      const i = this.head & this.mask;
      const cb = this.cbs[i];
      const ctx = this.ctxs[i];
      this.cbs[i] = null;
      this.ctxs[i] = undefined;
      this.head = (this.head + 1) >>> 0;
      if (cb !== null && cb !== undefined) {
        this.waiting--;
        invokeSafely(cb, err, null, ctx);
      }
    }
  }

  private skipAnswered(): void {
    while (this.head !== this.tail && this.cbs[this.head & this.mask] === null) {
      this.head = (this.head + 1) >>> 0;
    }
  }

  private grow(): void {
    const oldCbs = this.cbs;
    const oldCtxs = this.ctxs;
    const oldDeadlines = this.deadlines;
    const oldMask = this.mask;
    const cap = (oldMask + 1) * 2;
    this.cbs = new Array<DecideCallback | null>(cap).fill(null);
    this.ctxs = new Array<unknown>(cap).fill(undefined);
    this.deadlines = new Float64Array(cap);
    this.mask = cap - 1;
    for (let id = this.head; id !== this.tail; id = (id + 1) >>> 0) {
      this.cbs[id & this.mask] = oldCbs[id & oldMask]!;
      this.ctxs[id & this.mask] = oldCtxs[id & oldMask];
      this.deadlines[id & this.mask] = oldDeadlines[id & oldMask]!;
    }
  }
}

// The calls of one client awaiting their CALL_REPLY. Not rare: an owner sends a REPLICATE
// call per flush to each replica (~0.15 per decision at saturation, bench/peer-path.mjs), so
// one timer serves every call instead of a setTimeout and a clearTimeout per call, as undici
// does per connection. The timer is armed for the earliest deadline and left running when
// calls settle; when it fires it expires what is due and re-arms for the next, or stops.
// Left running, not cleared when the last call settles: with one call in flight per member
// the map empties after nearly every reply, so clearing would bring back a clear and a set
// per call; what it costs instead is one wake-up, once, a timeout after the last call.

import { performance } from "node:perf_hooks";
import { CallStatus } from "../wire/constants.js";
import { PeerError } from "../errors.js";
import type { CallReply } from "../wire/messages.js";

interface PendingCall {
  resolve: (payload: Buffer) => void;
  reject: (err: PeerError) => void;
  /** performance.now() after which it fails with a timeout. */
  deadline: number;
  method: number;
  timeoutMs: number;
}

export class PendingCalls {
  private readonly calls = new Map<number, PendingCall>();
  private nextId = 0;
  private timer: NodeJS.Timeout | null = null;
  /** When the armed timer fires (performance.now()); Infinity when none is armed. */
  private armedFor = Infinity;
  private readonly onTimerBound = (): void => this.onTimer();

  /** Register a call; `send(id)` writes its CALL frame. Settles with the reply, a timeout, or failAll(). */
  start(method: number, timeoutMs: number, send: (id: number) => void): Promise<Buffer> {
    const id = this.nextId;
    this.nextId = (id + 1) >>> 0;
    return new Promise<Buffer>((resolve, reject) => {
      const deadline = performance.now() + timeoutMs;
      this.calls.set(id, { resolve, reject, deadline, method, timeoutMs });
      // Calls of one timeout come in deadline order: the armed timer already fires first.
      if (deadline < this.armedFor) this.arm(deadline);
      send(id);
    });
  }

  /** A CALL_REPLY arrived; one for a call that timed out already is ignored. */
  settle(reply: CallReply): void {
    const c = this.calls.get(reply.callId);
    if (c === undefined) return;
    this.calls.delete(reply.callId);
    if (reply.status === CallStatus.OK) c.resolve(reply.payload);
    else c.reject(new PeerError("remote", reply.payload.toString("utf8")));
  }

  /** The connection is gone: every waiting call fails with `code`. */
  failAll(code: PeerError["code"], message: string): void {
    this.disarm();
    const calls = [...this.calls.values()];
    this.calls.clear();
    for (const c of calls) c.reject(new PeerError(code, message));
  }

  private arm(at: number): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.armedFor = at;
    this.timer = setTimeout(this.onTimerBound, Math.max(1, at - performance.now()));
  }

  private disarm(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.armedFor = Infinity;
  }

  private onTimer(): void {
    this.timer = null;
    this.armedFor = Infinity;
    // +1: timers may fire a fraction of a millisecond early by this clock.
    const now = performance.now() + 1;
    let next = Infinity;
    const due: PendingCall[] = [];
    for (const [id, c] of this.calls) {
      if (c.deadline <= now) {
        this.calls.delete(id);
        due.push(c);
      } else if (c.deadline < next) next = c.deadline;
    }
    if (next !== Infinity) this.arm(next);
    for (const c of due) c.reject(new PeerError("timeout", `call ${c.method} got no answer within ${c.timeoutMs} ms`));
  }
}

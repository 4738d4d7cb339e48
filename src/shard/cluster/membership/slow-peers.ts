/**
 * Forward outcomes per member, and the members suspected of being too slow to own keys.
 *
 * Heartbeats catch a silent peer, not a slow one: over a 150 ms link every PING is answered,
 * so the owner stays on the ring while every forward to it misses PEER_TIMEOUT_MS and fails
 * open (the fault suite: 12 s of degraded answers, the whole fault). So the forwards feed
 * the detector too, on the silent peer's time scale: a member is suspected when, over one
 * window of FAILURE_TIMEOUT_MS, at least SUSPECT_MIN_TIMEOUTS forwards to it timed out and
 * they were at least half of its forwards (so a slow peer is out 1-2 windows after it
 * turned slow); it then leaves this node's ring like a silent one, and its keys go to
 * their next owner.
 *
 * Hysteresis: a suspected member comes back only after a hold time AND once its heartbeat
 * round trip is under half the forward deadline again, so a link that stays slow does not
 * flap in and out; each new suspicion within FORGIVE_AFTER_MS doubles the hold.
 * Pure (the clock and the round trip are passed in); MemberPool acts on its answers.
 */
export const SUSPECT_MIN_TIMEOUTS = 3;
export const HOLD_MIN_MS = 1000;
export const HOLD_MAX_MS = 16_000;
const FORGIVE_AFTER_MS = 30_000;

interface Record {
  windowStart: number;
  forwards: number;
  timeouts: number;
  /** unix ms until which it is held out, or 0 */
  heldUntil: number;
  suspected: boolean;
  holdMs: number;
  lastSuspectedAt: number;
  /** last heartbeat round trip (ms) and when it was measured */
  rttMs: number;
  rttAt: number;
}

export class SlowPeers {
  private readonly records = new Map<string, Record>();

  constructor(
    private readonly peerTimeoutMs: number,
    /** FAILURE_TIMEOUT_MS */
    private readonly windowMs: number,
  ) {}

  /** One forward to `member` finished; true when this made it suspected. */
  note(member: string, timedOut: boolean, now: number): boolean {
    const r = this.record(member, now);
    if (now - r.windowStart < this.windowMs) {
      r.forwards++;
      if (timedOut) r.timeouts++;
      return false;
    }
    // A window closed: judge it, then start the next one with this forward.
    const slow = r.timeouts >= SUSPECT_MIN_TIMEOUTS && r.timeouts * 2 >= r.forwards;
    r.windowStart = now;
    r.forwards = 1;
    r.timeouts = timedOut ? 1 : 0;
    if (r.suspected || !slow) return false;
    r.holdMs = now - r.lastSuspectedAt < FORGIVE_AFTER_MS ? Math.min(HOLD_MAX_MS, r.holdMs * 2) : HOLD_MIN_MS;
    r.suspected = true;
    r.lastSuspectedAt = now;
    r.heldUntil = now + r.holdMs;
    return true;
  }

  /** A heartbeat round trip to `member` was measured. */
  noteRtt(member: string, rttMs: number, now: number): void {
    const r = this.record(member, now);
    r.rttMs = rttMs;
    r.rttAt = now;
  }

  isSuspected(member: string): boolean {
    return this.records.get(member)?.suspected === true;
  }

  /** How long the current suspicion of `member` holds it out at least (ms). */
  holdMs(member: string): number {
    return this.records.get(member)?.holdMs ?? 0;
  }

  get anySuspected(): boolean {
    for (const r of this.records.values()) if (r.suspected) return true;
    return false;
  }

  /**
   * Members whose hold has passed and whose heartbeat round trip, measured since they were
   * suspected, is under half the forward deadline: no longer suspected.
   */
  release(now: number): string[] {
    const released: string[] = [];
    for (const [member, r] of this.records) {
      if (!r.suspected || now < r.heldUntil) continue;
      if (!(r.rttAt > r.lastSuspectedAt && r.rttMs < this.peerTimeoutMs / 2)) continue;
      r.suspected = false;
      r.windowStart = now;
      r.forwards = 0;
      r.timeouts = 0;
      released.push(member);
    }
    return released;
  }

  forget(member: string): void {
    this.records.delete(member);
  }

  private record(member: string, now: number): Record {
    let r = this.records.get(member);
    if (r === undefined) {
      r = {
        windowStart: now,
        forwards: 0,
        timeouts: 0,
        heldUntil: 0,
        suspected: false,
        holdMs: HOLD_MIN_MS,
        lastSuspectedAt: -Infinity,
        rttMs: NaN,
        rttAt: -Infinity,
      };
      this.records.set(member, r);
    }
    return r;
  }
}

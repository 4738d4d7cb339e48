import { SHARE_MAX_MEMBERS, SHARE_MAX_WINDOW_S, type Sharers } from "../../local/share-rule.js";

/** Members an owner holds back for at once, its lingering ones included (itself excluded). */
export const MAX_HOLDERS = SHARE_MAX_MEMBERS - 1;
/** Names of members with an open connection here, at most (each costs one small entry). */
const MAX_TRACKED = 4096;

interface Member {
  /** authenticated connections of the member open here now */
  open: number;
  /** this node holds back a share for it (it asked: HOLD) */
  held: boolean;
  /** held and every connection closed: unix ms up to which a window's start still counts it; Infinity while one is open */
  until: number;
}

/**
 * Who an owner holds back a share for (docs/shares.md): the members that asked (HOLD) over
 * a connection still open here, and, once their last connection closed at C, for every window
 * that starts by C + `lingerMs`. A member answers a share by rule only while it heard from
 * this node within FAILURE_TIMEOUT_MS and only in windows starting after this node said yes
 * (shares.ts); `lingerMs` is that plus a margin for the clocks, so no window a member could
 * still answer in goes without its share held back. A lingering member is forgotten once every
 * window it counts in has ended (SHARE_MAX_WINDOW_S later): replaced pods stop costing shares.
 *
 * Invariant: a member that answers a share by rule of a window is counted by countAt() for
 * that window from before its first answer to the window's end. This replaces "every name
 * ever known", which grew with each replaced pod until the owner held back nothing while a
 * fresh member still answered from its share.
 */
export class Holders implements Sharers {
  private readonly members = new Map<string, Member>();
  /** held members with a connection open */
  private live = 0;
  /** held members whose connections all closed (counted by countAt while their `until` has not passed) */
  private lingering = 0;
  /**
   * Hold back for every member that connects, asked or not: what a member of peer protocol 11
   * expects (it answers shares by rule without asking HOLD). Set while the ring runs a version
   * below 12 (the version negotiation decides it); off, only the members that asked are held.
   */
  private everyone = false;

  constructor(
    /** FAILURE_TIMEOUT_MS plus a margin: how long after its last connection closed a member may still answer a share */
    private readonly lingerMs: number,
  ) {}

  /** Members held back for now, live or lingering. */
  get size(): number {
    return this.live + this.lingering;
  }

  countAt(windowStart: number): number {
    if (this.lingering === 0) return this.live;
    let n = this.live;
    for (const [name, m] of this.members) {
      if (!m.held || m.open > 0) continue;
      if (m.until >= windowStart) n++;
      // Every window it counted in (at most SHARE_MAX_WINDOW_S long) has ended.
      else if (m.until + SHARE_MAX_WINDOW_S * 1000 < windowStart) this.forget(name, m);
    }
    return n;
  }

  /** `member` authenticated a connection here. */
  opened(member: string): void {
    let m = this.members.get(member);
    if (m === undefined) {
      if (this.members.size >= MAX_TRACKED) return;
      this.members.set(member, (m = { open: 0, held: false, until: Infinity }));
    }
    if (m.open++ === 0 && m.held) {
      this.lingering--;
      this.live++;
      m.until = Infinity;
    }
    if (this.everyone) this.admit(member, 0, 0);
  }

  /** Hold back for every member that connects (a ring at peer protocol 11), the connected ones now included; see `everyone`. */
  holdEveryone(on: boolean, now: number): void {
    this.everyone = on;
    if (on) for (const [name, m] of this.members) if (m.open > 0) this.admit(name, 0, now);
  }

  /** A connection of `member` authenticated here closed at `now`. */
  closed(member: string, now: number): void {
    const m = this.members.get(member);
    if (m === undefined || m.open === 0) return;
    if (--m.open > 0) return;
    if (!m.held) {
      this.members.delete(member);
      return;
    }
    this.live--;
    this.lingering++;
    m.until = now + this.lingerMs;
  }

  /**
   * HOLD from `member` (over a connection open here): from now on, every window counts its
   * share. Yes while this node's ring has at most SHARE_MAX_MEMBERS members and fewer than
   * MAX_HOLDERS are held (lingering ones included); a member held already is told yes again.
   */
  admit(member: string, ringSize: number, now: number): boolean {
    const m = this.members.get(member);
    if (m === undefined || m.open === 0) return false;
    if (m.held) return true;
    if (this.lingering > 0) this.countAt(now); // forgets the lingering ones whose windows all ended
    if (ringSize > SHARE_MAX_MEMBERS || this.size >= MAX_HOLDERS) return false;
    m.held = true;
    m.until = Infinity;
    this.live++;
    return true;
  }

  private forget(name: string, m: Member): void {
    this.members.delete(name);
    if (m.held && m.open === 0) this.lingering--;
  }
}

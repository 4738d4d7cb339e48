import { algorithmByCode } from "../../../algorithms/index.js";
import { fixedWindowStart } from "../../../algorithms/fixed-window.js";
import type { Decision, LimitQuery } from "../../../decision.js";
import type { PeerClient } from "../../../peer/index.js";
import { ownerLimit, shareOf, SHARE_MAX_MEMBERS } from "../../local/share-rule.js";
import type { HashRing } from "../../ring/ring.js";
import { parseStateKey, ringKeyOfStateKey, splitRingKey } from "../../ring/state-key.js";
import { encodeGiveBack, MAX_GIVE_BACK_AGE_MS } from "../wire/batch-wire.js";
import { CallMethod } from "../wire/call-methods.js";
import { decodeLeaseReply, encodeLeaseRequest } from "../wire/lease-wire.js";
import { resetTimeHere } from "../wire/peer-data.js";
import type { KnownMembers } from "./known-members.js";
import { NO_SHARE, SHARE_KEEP_MS, type Share, type ShareTable } from "./share-table.js";

/**
 * A share is taken only for a window that began at least this long after this node's
 * connection to the owner came up, on the owner's clock as read here. By then the owner
 * counts this node among its sharers (it authenticated the connection first), so it held
 * back this node's share for the whole window; and a node that restarted cannot take a share
 * again in a window its earlier process may have taken one in. Covers the clock offset's
 * error (half a heartbeat round trip) many times over.
 */
export const SHARE_MARGIN_MS = 1000;
/**
 * A sharer takes shares while it has known at most this many members, fewer than an owner
 * holds back shares for (SHARE_MAX_MEMBERS): views of a cluster that disagree while DNS
 * catches up must differ by more than four members before a share goes unreserved.
 */
export const SHARER_MAX_MEMBERS = SHARE_MAX_MEMBERS - 4;
/**
 * A share that opened empty (a window that began before this node's connection to the owner)
 * is filled by the opening grant that comes back with the key's first forward (wantsOpening);
 * when that brought nothing (refused, lost), a LEASE is asked only once this many of the key's
 * requests in a row went to the owner, each within MISS_RUN_MS of the one before
 * (share-table.ts): a hot key. A LEASE at a key's first request, and a GIVE_BACK a second later
 * unused, made three peer calls where one forward does (bench row ringlimit-service3, load
 * 9–11: 52.5 µs of CPU per decision against 37.0 µs before shares existed).
 */
export const ASK_EMPTY_AFTER_MISSES = 2;
/** A grant not drawn on for this long goes back to the owner (one sweep a second, not a timer per key). */
export const RETURN_IDLE_MS = 1000;
/** Resets heard of, remembered (newest kept) for longer than any LEASE call may take. */
const MAX_RESETS = 4096;
const RESET_KEEP_MS = 60_000;

/** What the shares read of the cluster: the ring and a member's connection. */
export interface SharesView {
  readonly ring: HashRing;
  client(member: string): PeerClient | undefined;
}

/**
 * A non-owner answers a key from its share of the window (share-rule.ts), in the turn the
 * request arrived and without asking the owner, so a pipelining client's connection
 * survives (docs/api.md, Pipelining). Fixed windows only: the window is the owner's (its
 * clock, as this node reads it from heartbeats), and the share is counted there from the
 * window's start. Anything the share cannot answer (another algorithm, a small limit, a
 * share used up, a limit other than the one the share was taken for, a window that began
 * before this node's connection to the owner) goes to the owner as before.
 */
export class Shares {
  private timer: NodeJS.Timeout | undefined;
  /** ring key → unix ms a reset of it was heard of: a grant asked before it is not taken */
  private readonly resets = new Map<string, number>();
  /** requests owners granted this node (LEASE), and requests it gave back unused (metrics) */
  granted = 0;
  returned = 0;

  constructor(
    private readonly table: ShareTable,
    private readonly members: KnownMembers,
    /** whether this node's policy may change the query's limit (an override, SHADOW_MODE): then the owner decides */
    private readonly overridden: (query: LimitQuery) => boolean,
    private readonly view: SharesView,
    /** deadline of a LEASE or GIVE_BACK call (PEER_TIMEOUT_MS) */
    private readonly timeoutMs: number,
  ) {}

  /** One sweep a second returns idle grants (RETURN_IDLE_MS). */
  start(): void {
    this.timer = setInterval(() => this.returnIdle(Date.now()), RETURN_IDLE_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Whether `query` may be answered from a share at all: a check on numbers, before any key is built. */
  shareable(query: LimitQuery): boolean {
    // A charge is counted on the owner, whatever remains: a share cannot hold debt.
    return query.charge !== true && shareOf(query.algorithm.code, query.limit) !== 0 && this.members.count <= SHARER_MAX_MEMBERS && !this.overridden(query);
  }

  /** The decision from this node's share of `stateKey`, written into `out`; undefined: ask the owner. */
  answer(query: LimitQuery, stateKey: string, owner: PeerClient, now: number, out: Decision): Decision | undefined {
    const offset = owner.clockOffsetMs;
    if (Number.isNaN(offset)) return undefined;
    const ownerNow = Math.floor(now + offset);
    const D = query.duration * 1000;
    const windowStart = fixedWindowStart(ownerNow, D);
    const windowEndHere = windowStart + D - offset;
    // The share by rule only in a window that began after the connection came up; in an
    // earlier one (a node just started or reconnected) the share starts empty: the key's first
    // request goes to the owner and brings back an opening grant, the ones after it stay here.
    const byRule = windowStart >= owner.upSince + offset + SHARE_MARGIN_MS;
    const code = query.algorithm.code;
    const share = shareOf(code, query.limit);
    const left = this.table.take(stateKey, windowStart, windowEndHere + SHARE_KEEP_MS, query.limit, share, query.cost, byRule, now);
    if (left === NO_SHARE) {
      // Used up: asked for more now, so the requests after the grant are answered here again.
      // Empty since the window opened: only for a hot key (ASK_EMPTY_AFTER_MISSES).
      const s = this.table.entry(stateKey);
      if (s !== undefined && (byRule || s.misses >= ASK_EMPTY_AFTER_MISSES)) this.ask(query, stateKey, s, owner, share, now);
      return undefined;
    }
    if (left < share / 2) this.ask(query, stateKey, this.table.entry(stateKey)!, owner, share, now);
    out.allowed = true;
    // An estimate (docs/api.md, Shares): this node's share left, plus what the owner had for
    // itself when the window began; the other members' shares count as used.
    out.remaining = left + ownerLimit(code, query.limit, this.members.count - 1);
    // As a forwarded answer's (resetTimeHere): the owner's reading, moved by the offset in whole seconds.
    out.resetTime = resetTimeHere(Math.ceil((windowStart + D) / 1000), offset);
    out.retryAfterMs = 0;
    out.degraded = null;
    out.applied = null;
    out.shadow = false;
    return out;
  }

  /** LEASE: one share more of the key's window, asked of its owner once at a time (grants.ts answers). */
  private ask(query: LimitQuery, stateKey: string, s: Share, owner: PeerClient, share: number, askedAt: number): void {
    if (s.asking || s.refused || s.limit !== query.limit) return;
    s.asking = true;
    owner.call(CallMethod.LEASE, encodeLeaseRequest(query, share), this.timeoutMs).then(
      (reply) => {
        s.asking = false;
        // A reply out of bounds is the owner's error: nothing granted (and nothing thrown into the loop).
        let grant: { granted: number; windowStart: number };
        try {
          grant = decodeLeaseReply(reply);
        } catch {
          return;
        }
        this.takeGrant(stateKey, grant.windowStart, grant.granted, askedAt, false);
      },
      () => {
        s.asking = false;
      },
    );
  }

  /**
   * Whether the forward of `stateKey` asks its owner for an opening grant (DecideItemFlag.OPENING):
   * its share of this window opened empty (the window began before this node's connection to
   * the owner, so the share by rule may have been used by an earlier process of this node) and
   * has not asked yet. The grant comes back with the decision (openingGranted): no LEASE, and it
   * is kept for the window like a share by rule, so no GIVE_BACK either. In the window current
   * when a node starts, a key's first request there goes to its owner, not every request.
   */
  wantsOpening(stateKey: string, limit: number): boolean {
    return this.table.wantsOpening(stateKey, limit);
  }

  /** The opening grant that came back with a forward sent at `askedAt` (unix ms); more than one share is the owner's error and is not taken. */
  openingGranted(stateKey: string, query: LimitQuery, windowStartMs: number, granted: number, askedAt: number): void {
    if (granted > shareOf(query.algorithm.code, query.limit)) return;
    this.takeGrant(stateKey, windowStartMs, granted, askedAt, true);
  }

  /**
   * What an owner granted for a request sent at `askedAt`, a LEASE's or an opening one (`keep`),
   * counted by the owner at once: lost if this node has moved on from that window meanwhile,
   * and not taken if a reset of the identifier came since (it was counted in what that erased).
   */
  private takeGrant(stateKey: string, windowStart: number, granted: number, askedAt: number, keep: boolean): void {
    if (this.resets.size > 0 && (this.resets.get(ringKeyOfStateKey(stateKey)) ?? 0) >= askedAt) return;
    if (this.table.grant(stateKey, windowStart, granted, Date.now(), keep)) this.granted += granted;
  }

  /** RESET_NOTICE: the owner reset the identifier of `ringKey`; the grants of its keys here go with its counts. */
  forgetGrants(ringKey: string): void {
    this.table.forgetGrants(ringKey);
    const now = Date.now();
    this.resets.delete(ringKey);
    this.resets.set(ringKey, now);
    for (const [key, at] of this.resets) {
      if (this.resets.size <= MAX_RESETS && at > now - RESET_KEEP_MS) break;
      this.resets.delete(key);
    }
  }

  /** Give back to their owners the grants of shares no request drew on for RETURN_IDLE_MS. */
  returnIdle(now: number): void {
    this.table.returnIdle(now, RETURN_IDLE_MS, (stateKey, s, requests) => this.giveBack(stateKey, s, requests, now));
  }

  private giveBack(stateKey: string, s: Share, requests: number, now: number): void {
    const parsed = parseStateKey(stateKey);
    const algorithm = parsed === undefined ? undefined : algorithmByCode(parsed.algorithmCode);
    if (parsed === undefined || algorithm === undefined) return;
    const { namespace, identifier } = splitRingKey(parsed.ringKey);
    const owner = this.view.ring.owner(parsed.ringKey);
    const client = owner === undefined ? undefined : this.view.client(owner);
    if (client === undefined) return; // the owner changed or is gone: the grant stays counted (under-admitted)
    const query: LimitQuery = { namespace, identifier, limit: s.limit, duration: parsed.duration, algorithm, cost: requests };
    // Counted when granted, in the window that is still this share's: any moment since then is in it.
    const ageMs = Math.min(now - s.grantedAt, MAX_GIVE_BACK_AGE_MS - 1000);
    this.returned += requests;
    client.call(CallMethod.GIVE_BACK, encodeGiveBack(ageMs, query), this.timeoutMs).catch(() => {});
  }
}

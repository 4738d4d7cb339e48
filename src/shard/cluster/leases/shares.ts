import { algorithmByCode } from "../../../algorithms/index.js";
import { fixedWindowStart } from "../../../algorithms/fixed-window.js";
import type { Decision, LimitQuery } from "../../../decision.js";
import type { PeerClient } from "../../../peer/index.js";
import { ownerLimit, ruledWindow, shareOf } from "../../local/share-rule.js";
import type { HashRing } from "../../ring/ring.js";
import type { HeardResets } from "../../table/reset-memory.js";
import type { StateTable } from "../../table/state-table.js";
import { parseStateKey, ringKeyOfStateKey, splitRingKey } from "../../ring/state-key.js";
import { encodeGiveBack, MAX_GIVE_BACK_AGE_MS } from "../wire/batch-wire.js";
import { CallMethod } from "../wire/call-methods.js";
import { decodeHoldReply, decodeLeaseReply, encodeLeaseRequest } from "../wire/lease-wire.js";
import { resetTimeHere } from "../wire/peer-data.js";
import { NO_SHARE, SHARE_KEEP_MS, type Share, type ShareTable } from "./share-table.js";

/**
 * A share by rule is taken only for a window that began at least this long after the owner
 * said it holds one back for this node (HOLD), on the owner's clock as read here: the owner
 * counted this node for the whole window; and a node that restarted cannot take a share again
 * in a window its earlier process may have taken one in (it asks again on its new
 * connection). Covers the clock offset's error (half a heartbeat round trip) many times over.
 */
export const SHARE_MARGIN_MS = 1000;
/** A HOLD refused or failed (an owner of protocol 11 does not know it) is asked again after this long. */
export const HOLD_RETRY_MS = 10_000;
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

/** What the shares read of the cluster: the ring and a member's connection. */
export interface SharesView {
  readonly ring: HashRing;
  client(member: string): PeerClient | undefined;
}

/** What this node knows of its connection to one owner (docs/shares.md). */
interface OwnerLink {
  /** the connection's upSince: another value is another connection */
  upSince: number;
  /** this node's number for that connection: what a share and its grants were taken on (Share.epoch) */
  epoch: number;
  /** unix ms (this node's clock) the owner's yes to HOLD was asked; NaN: no yes on this connection */
  heldSince: number;
  /** members the owner said it holds back for (the estimate of `remaining`) */
  holders: number;
  asking: boolean;
  /** unix ms before which a refused or failed HOLD is not asked again */
  retryAt: number;
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
/**
 * A non-owner answers a key from its share of the window (share-rule.ts, docs/shares.md), in
 * the turn the request arrived and without asking the owner, so a pipelining client's
 * connection survives (docs/api.md, Pipelining). Fixed windows only: the window is the
 * owner's (its clock, as this node reads it from heartbeats). What this node may answer:
 *
 * - a share by rule only of an owner that said it holds one back for this node (HOLD, asked
 *   once per connection), in windows that began after that, while the same connection is up
 *   and heard from within FAILURE_TIMEOUT_MS, and while this node runs the owner's policy;
 * - grants (LEASE, opening grants), counted on the owner when given, only on the connection
 *   they came by: an owner that changed, restarted or failed over may not hold their count.
 *
 * Anything else (another algorithm, a small limit, a share used up, a limit other than the
 * one the share was taken for) goes to the owner.
 */
export class Shares {
  private timer: NodeJS.Timeout | undefined;
  /** per owner connection: its epoch and the owner's answer to HOLD */
  private readonly links = new Map<PeerClient, OwnerLink>();
  private epochs = 0;
  /** requests owners granted this node (LEASE), and requests it gave back unused (metrics) */
  granted = 0;
  returned = 0;

  constructor(
    private readonly table: ShareTable,
    /** the resets heard of (RESET_NOTICE, written by the blocked cache): the node's one memory of them */
    private readonly resets: HeardResets,
    /** whether this node's policy may change the query's limit (an override, SHADOW_MODE): then the owner decides */
    private readonly overridden: (query: LimitQuery) => boolean,
    /** whether `owner` told (heartbeats) the policy version this node runs: else its limit may not be this node's */
    private readonly samePolicy: (owner: string) => boolean,
    private readonly view: SharesView,
    /** deadline of a LEASE, HOLD or GIVE_BACK call (PEER_TIMEOUT_MS) */
    private readonly timeoutMs: number,
    /** FAILURE_TIMEOUT_MS: an owner not heard from for longer may have stopped holding back (holders.ts) */
    private readonly silenceMs: number,
  ) {}

  /** One sweep a second returns idle grants (RETURN_IDLE_MS) and asks HOLD of owners connected since. */
  start(): void {
    this.timer = setInterval(() => {
      const now = Date.now();
      this.returnIdle(now);
      this.holdAll(now);
    }, RETURN_IDLE_MS);
    this.timer.unref();
  }

  /**
   * Ask HOLD of every member up that has not answered it on its connection, so a share by rule
   * is there from the windows that begin a second or two after a connection comes up (a
   * request asks it too: linkOf); forget the links of clients no longer on the ring.
   */
  private holdAll(now: number): void {
    const ring = this.view.ring;
    for (const member of ring.members) {
      const client = this.view.client(member);
      if (client !== undefined && client.state === "up") this.linkOf(client, now);
    }
    if (this.links.size > ring.size)
      for (const client of this.links.keys()) if (!ring.members.some((m) => this.view.client(m) === client)) this.links.delete(client);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Whether `query` may be answered from a share at all: a check on numbers, before any key is built. */
  shareable(query: LimitQuery): boolean {
    // A charge is counted on the owner, whatever remains: a share cannot hold debt.
    return query.charge !== true && shareOf(query.algorithm.code, query.limit) !== 0 && !this.overridden(query);
  }

  /** The decision from this node's share of `stateKey` (owned by `ownerName`), written into `out`; undefined: ask the owner. */
  answer(query: LimitQuery, stateKey: string, owner: PeerClient, ownerName: string, now: number, out: Decision): Decision | undefined {
    const offset = owner.clockOffsetMs;
    if (Number.isNaN(offset)) return undefined;
    // Silent past FAILURE_TIMEOUT_MS (this node was paused, the link is cut): the owner may have
    // closed the connection and stopped holding back for this node (holders.ts).
    if (owner.silentMs() > this.silenceMs) return undefined;
    // Another policy than the owner's (a ConfigMap rolling out): the owner's limit is not known here.
    if (!this.samePolicy(ownerName)) return undefined;
    const link = this.linkOf(owner, now);
    const ownerNow = Math.floor(now + offset);
    const D = query.duration * 1000;
    const windowStart = fixedWindowStart(ownerNow, D);
    const windowEndHere = windowStart + D - offset;
    // The share by rule only in a window that began after the owner said it holds one back; in
    // an earlier one (a node just started or reconnected) the share starts empty: the key's
    // first request goes to the owner and brings back an opening grant, the ones after it stay here.
    const byRule = windowStart >= link.heldSince + offset + SHARE_MARGIN_MS && ruledWindow(query.duration);
    const code = query.algorithm.code;
    const share = shareOf(code, query.limit);
    const left = this.table.take(stateKey, windowStart, windowEndHere + SHARE_KEEP_MS, query.limit, share, query.cost, byRule, now, link.epoch);
    if (left === NO_SHARE) {
      // Used up: asked for more now, so the requests after the grant are answered here again.
      // Empty since the window opened: only for a hot key (ASK_EMPTY_AFTER_MISSES).
      const s = this.table.entry(stateKey);
      if (s !== undefined && (byRule || s.misses >= ASK_EMPTY_AFTER_MISSES)) this.ask(query, stateKey, s, owner, link.epoch, share, now);
      return undefined;
    }
    if (left < share / 2) this.ask(query, stateKey, this.table.entry(stateKey)!, owner, link.epoch, share, now);
    out.allowed = true;
    // An estimate (docs/api.md, Shares): this node's share left, plus what the owner had for
    // itself when the window began; the other members' shares count as used.
    out.remaining = left + ownerLimit(code, query.limit, Number.isNaN(link.heldSince) ? 0 : link.holders);
    // As a forwarded answer's (resetTimeHere): the owner's reading, moved by the offset in whole seconds.
    out.resetTime = resetTimeHere(Math.ceil((windowStart + D) / 1000), offset);
    out.retryAfterMs = 0;
    out.degraded = null;
    out.applied = null;
    out.shadow = false;
    return out;
  }

  /** The link to `owner` on its current connection (a new epoch for a new one), asking HOLD when it has no answer yet. */
  private linkOf(owner: PeerClient, now: number): OwnerLink {
    let link = this.links.get(owner);
    if (link === undefined || link.upSince !== owner.upSince) {
      // A link per owner client: the pool keeps one client per member name, so this is bounded by its pool.
      link = { upSince: owner.upSince, epoch: ++this.epochs, heldSince: NaN, holders: 0, asking: false, retryAt: 0 };
      this.links.set(owner, link);
    }
    if (Number.isNaN(link.heldSince) && !link.asking && now >= link.retryAt) this.askHold(owner, link, now);
    return link;
  }

  private askHold(owner: PeerClient, link: OwnerLink, askedAt: number): void {
    link.asking = true;
    const refused = (): void => {
      link.asking = false;
      link.retryAt = Date.now() + HOLD_RETRY_MS;
    };
    owner.call(CallMethod.HOLD, Buffer.alloc(0), this.timeoutMs).then((reply) => {
      let answer: { held: boolean; holders: number };
      try {
        answer = decodeHoldReply(reply);
      } catch {
        return refused();
      }
      // A yes for a connection since replaced says nothing of the new one.
      if (!answer.held || owner.upSince !== link.upSince) return refused();
      link.asking = false;
      // Asked at `askedAt`: the owner counted this node from a moment after it, so windows
      // that begin SHARE_MARGIN_MS after it on its clock were held back whole.
      link.heldSince = askedAt;
      link.holders = answer.holders;
    }, refused);
  }

  /** LEASE: one share more of the key's window, asked of its owner once at a time (grants.ts answers). */
  private ask(query: LimitQuery, stateKey: string, s: Share, owner: PeerClient, epoch: number, share: number, askedAt: number): void {
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
        this.takeGrant(stateKey, grant.windowStart, grant.granted, askedAt, epoch, false);
      },
      () => {
        s.asking = false;
      },
    );
  }

  /**
   * Whether the forward of `stateKey` asks its owner for an opening grant (DecideItemFlag.OPENING):
   * its share of this window opened empty (the window began before the owner's HOLD yes, so the
   * share by rule may have been used by an earlier process of this node, or the owner holds
   * none back for it) and has not asked yet. The grant comes back with the decision
   * (openingGranted): no LEASE, and it is kept for the window like a share by rule, so no
   * GIVE_BACK either. In the window current when a node starts, a key's first request there
   * goes to its owner, not every request.
   */
  wantsOpening(stateKey: string, limit: number): boolean {
    return this.table.wantsOpening(stateKey, limit);
  }

  /** The opening grant that came back over `owner`'s connection with a forward sent at `askedAt` (unix ms); more than one share is the owner's error and is not taken. */
  openingGranted(stateKey: string, query: LimitQuery, windowStartMs: number, granted: number, askedAt: number, owner: PeerClient): void {
    if (granted > shareOf(query.algorithm.code, query.limit)) return;
    const link = this.links.get(owner);
    if (link === undefined || link.upSince !== owner.upSince) return;
    this.takeGrant(stateKey, windowStartMs, granted, askedAt, link.epoch, true);
  }

  /**
   * What an owner granted for a request sent at `askedAt`, a LEASE's or an opening one (`keep`),
   * counted by the owner at once: lost if this node has moved on from that window or that
   * connection meanwhile, and not taken if a reset of the identifier came since (it was
   * counted in what that erased). Its age is counted from `askedAt`, before the owner counted
   * it: a give-back (returnIdle) names a moment no later than the count.
   */
  private takeGrant(stateKey: string, windowStart: number, granted: number, askedAt: number, epoch: number, keep: boolean): void {
    if ((this.resets.resetHeardAt(ringKeyOfStateKey(stateKey), Date.now()) ?? 0) >= askedAt) return;
    if (this.table.grant(stateKey, windowStart, granted, askedAt, epoch, keep)) this.granted += granted;
  }

  /**
   * The ring changed and this node owns keys it held shares of: what it answered of their
   * current windows from shares by rule was held back by their previous owner, in no count
   * that moves here (a hand-off moves counts, not what an owner held back), so it is counted
   * into `owned` now, in this node's current window of each (docs/shares.md, hand-off).
   */
  foldOwned(owned: StateTable, owns: (ringKey: string) => boolean, now: number): void {
    this.table.foldOwned(owns, now, (stateKey, requests) => {
      const parsed = parseStateKey(stateKey);
      if (parsed === undefined) return;
      const D = parsed.duration * 1000;
      const windowStart = fixedWindowStart(now, D);
      const s = owned.get(stateKey);
      // A count carried into the next window (a skewed hand-off: algorithms/ages.ts) stays there, with these added.
      const a = s !== undefined && s.a > windowStart ? s.a : windowStart;
      const b = (s !== undefined && s.a === a ? s.b : 0) + requests;
      const expiresAt = Math.ceil((a + D) / 1000);
      owned.set(stateKey, { a, b, c: 0, expiresAt, origin: s?.origin ?? 0, born: s?.born ?? Math.floor(now / 1000) });
    });
  }

  /**
   * DEBT_NOTICE from `from`, the owner: a charge took `stateKey` past its limit in the window
   * starting at `windowStart` (its clock). Nothing of that window is answered here from then on
   * (ShareTable.indebted), kept until the window ends as this node reads the owner's clock.
   */
  indebted(stateKey: string, windowStart: number, from: string, now: number): void {
    const parsed = parseStateKey(stateKey);
    if (parsed === undefined) return;
    const owner = this.view.client(from);
    const offset = owner === undefined || Number.isNaN(owner.clockOffsetMs) ? 0 : owner.clockOffsetMs;
    this.table.indebted(stateKey, windowStart, windowStart + parsed.duration * 1000 - offset + SHARE_KEEP_MS, now);
  }

  /** RESET_NOTICE: the owner reset the identifier of `ringKey` (heard of: the blocked cache noted it); the grants of its keys here go with its counts. */
  forgetGrants(ringKey: string): void {
    this.table.forgetGrants(ringKey);
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
    // Only to the owner that granted it, on the connection it came by: another owner (a replica
    // promoted after the granting one died) never counted it, and would refund what it holds of
    // other requests. The owner changed or is gone: the grant stays counted (under-admitted).
    const link = client === undefined ? undefined : this.links.get(client);
    if (client === undefined || link === undefined || link.upSince !== client.upSince || link.epoch !== s.epoch) return;
    // Older than a give-back may say: its window is long, and the moment could not be named.
    if (now - s.grantedAt >= MAX_GIVE_BACK_AGE_MS - 1000) return;
    const query: LimitQuery = { namespace, identifier, limit: s.limit, duration: parsed.duration, algorithm, cost: requests };
    // Asked at grantedAt, counted after: the owner refunds only into a state that held it then
    // (inbound-calls.ts, GIVE_BACK: none reset or begun since).
    const ageMs = now - s.grantedAt;
    this.returned += requests;
    client.call(CallMethod.GIVE_BACK, encodeGiveBack(ageMs, query), this.timeoutMs).catch(() => {});
  }
}

import type { Decision, LimitQuery } from "../../../decision.js";
import type { PeerClient } from "../../../peer/index.js";
import { ownerLimit, shareOf, SHARE_MAX_MEMBERS } from "../../local/share-rule.js";
import { resetTimeHere } from "../wire/peer-data.js";
import type { KnownMembers } from "./known-members.js";
import { NO_SHARE, SHARE_KEEP_MS, type ShareTable } from "./share-table.js";

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
 * A non-owner answers a key from its share of the window (share-rule.ts), in the turn the
 * request arrived and without asking the owner, so a pipelining client's connection
 * survives (docs/api.md, Pipelining). Fixed windows only: the window is the owner's (its
 * clock, as this node reads it from heartbeats), and the share is counted there from the
 * window's start. Anything the share cannot answer (another algorithm, a small limit, a
 * share used up, a limit other than the one the share was taken for, a window that began
 * before this node's connection to the owner) goes to the owner as before.
 */
export class Shares {
  constructor(
    private readonly table: ShareTable,
    private readonly members: KnownMembers,
    /** whether this node's policy may change the query's limit (an override, SHADOW_MODE): then the owner decides */
    private readonly overridden: (query: LimitQuery) => boolean,
  ) {}

  /** Whether `query` may be answered from a share at all: a check on numbers, before any key is built. */
  shareable(query: LimitQuery): boolean {
    return shareOf(query.algorithm.code, query.limit) !== 0 && this.members.count <= SHARER_MAX_MEMBERS && !this.overridden(query);
  }

  /** The decision from this node's share of `stateKey`, written into `out`; undefined: ask the owner. */
  answer(query: LimitQuery, stateKey: string, owner: PeerClient, now: number, out: Decision): Decision | undefined {
    const offset = owner.clockOffsetMs;
    if (Number.isNaN(offset)) return undefined;
    const ownerNow = Math.floor(now + offset);
    const D = query.duration * 1000;
    const windowStart = ownerNow - (ownerNow % D);
    const windowEndHere = windowStart + D - offset;
    const mayOpen = windowStart >= owner.upSince + offset + SHARE_MARGIN_MS;
    const code = query.algorithm.code;
    const left = this.table.take(stateKey, windowStart, windowEndHere + SHARE_KEEP_MS, query.limit, shareOf(code, query.limit), query.cost, mayOpen, now);
    if (left === NO_SHARE) return undefined;
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
}

import { ringKeyOfStateKey } from "../../ring/state-key.js";
import { SHARE_DIVISOR } from "../../local/share-rule.js";
import { stringBytes } from "../../table/key-bytes.js";

/** What an entry costs beside its key string: the Map entry and the Share object (header, seven number fields, a flag). */
const ENTRY_OVERHEAD_BYTES = 128;
/** What an entry of the kept-grant index costs beside its ring key string: the Map entry and a one-key array. */
const KEPT_OVERHEAD_BYTES = 64;
/** A full table sweeps the ended windows at most this often: the sweep is a scan. */
const SWEEP_EVERY_MS = 1000;
/**
 * A share is kept this long past the end of its window as this node reads the owner's clock:
 * dropped earlier, a share could be taken again in a window it was already taken in, if the
 * clock offset estimate moved back by that much.
 */
export const SHARE_KEEP_MS = 5000;

export interface Share {
  /** the window's start on the owner's clock (unix ms) */
  windowStart: number;
  /** the limit the share was taken for: another limit asks the owner */
  limit: number;
  /** requests this node may still answer from it */
  left: number;
  /** unix ms on this node's clock after which the entry may go (SHARE_KEEP_MS past its window) */
  keepUntil: number;
  /** a LEASE for more is on its way */
  asking: boolean;
  /** the owner granted nothing in this window (near the limit): not asked again until the next */
  refused: boolean;
  /** requests answered from it in this window */
  spent: number;
  /** requests the owner granted in this window (LEASE): the part of `left` that can be returned */
  granted: number;
  /** unix ms (this node's clock) the first grant held now was asked (before the owner counted it), and of the last request answered */
  grantedAt: number;
  usedAt: number;
  /** requests the share could not answer (they went to the owner), each within MISS_RUN_MS of the one before */
  misses: number;
  /** unix ms of the last of them */
  missedAt: number;
  /** the share opened with the rule's requests (`byRule`), not empty */
  ruled: boolean;
  /** opened empty, and a forward of the key asked its owner for an opening grant (DecideItemFlag.OPENING) */
  opened: boolean;
  /** holds an opening grant: what is left of it stays here until the window ends, not returned when idle */
  keep: boolean;
  /**
   * The owner's connection (shares.ts, its epoch) this share and its grants were taken on. On
   * another (the owner changed, restarted, failed over, or the connection was lost) all it
   * holds is void: the count it was held back from or granted out of may not be the owner's now.
   */
  epoch: number;
  /**
   * The owner told this window's count is past the limit (DEBT_NOTICE): nothing of the window
   * is answered here any more, a grant arriving late included. Cleared when the window ends.
   */
  indebted: boolean;
}

/** A share of nothing yet for a window: nothing left, spent, granted or asked. */
function newShare(windowStart: number, limit: number, keepUntil: number, now: number, epoch: number): Share {
  return {
    windowStart,
    limit,
    left: 0,
    keepUntil,
    asking: false,
    refused: false,
    spent: 0,
    granted: 0,
    grantedAt: 0,
    usedAt: now,
    misses: 0,
    missedAt: 0,
    ruled: false,
    opened: false,
    keep: false,
    epoch,
    indebted: false,
  };
}

/** Misses further apart than this start a new run: a key asked for about once a second or less is not hot. */
export const MISS_RUN_MS = 100;

/** What take() found: the share left after the request, or why it cannot be answered here. */
export const NO_SHARE = -1;

/**
 * A member's shares of keys it does not own, one per state key, for one window at a time
 * (share-rule.ts). Bounded in bytes: when a new share does not fit, ended windows are swept
 * (one scan, at most once a second) and, if still full, the new share is not taken: the
 * request goes to its owner. A share whose window has not ended is never dropped, because
 * taking it again in the same window would count it twice.
 */
export class ShareTable {
  private readonly shares = new Map<string, Share>();
  private heldBytes = 0;
  private sweptAt = 0;
  /** state keys whose share holds a grant that goes back when idle: the only ones the sweep and a reset look at */
  private readonly holding = new Set<string>();
  /**
   * ring key → state keys whose share holds kept grants (opening grants: not returned when
   * idle, so they can be many, up to every key of a window after a start). A reset finds its
   * keys here by ring key, instead of a scan; the idle sweep never sees them. With 100,000
   * opening grants kept in the returnable set, the once-a-second sweep held the event loop
   * 10.1 ms and each RESET_NOTICE 1.9 ms; indexed here, 0.005 ms and 0.001 ms.
   */
  private readonly kept = new Map<string, string[]>();

  constructor(readonly maxBytes: number) {}

  get size(): number {
    return this.shares.size;
  }

  get bytes(): number {
    return this.heldBytes;
  }

  /**
   * Take `cost` (0: a peek) from the share of `stateKey` for the window starting at
   * `windowStart` (owner's clock). A share of an earlier window, or none, is replaced by a
   * fresh one: `share` requests when the rule allows it (`byRule`), else none, to be filled by
   * the owner's grants only (a grant is counted on the owner, so it needs no rule). Returns
   * what is left after the request, or NO_SHARE when it must go to the owner.
   */
  take(
    stateKey: string,
    windowStart: number,
    keepUntil: number,
    limit: number,
    share: number,
    cost: number,
    byRule: boolean,
    now: number,
    epoch: number,
  ): number {
    let s = this.shares.get(stateKey);
    if (s !== undefined && s.epoch !== epoch) this.void(stateKey, s, epoch);
    if (s === undefined || s.windowStart !== windowStart) {
      // A later window already open here: the owner's clock, as read, went back.
      if (s !== undefined && s.windowStart > windowStart) return NO_SHARE;
      const opening = byRule ? share : 0;
      if (s === undefined) {
        s = this.insert(stateKey, now, newShare(windowStart, limit, keepUntil, now, epoch));
        if (s === undefined) return NO_SHARE;
        s.left = opening;
        s.ruled = byRule;
      } else {
        if (s.keep) this.unkeep(stateKey);
        s.windowStart = windowStart;
        s.limit = limit;
        s.left = opening;
        s.keepUntil = keepUntil;
        // What was granted for the window that ended was counted in it: nothing to return.
        s.granted = 0;
        s.spent = 0;
        s.refused = false;
        s.misses = 0;
        s.ruled = byRule;
        s.opened = false;
        s.keep = false;
        s.indebted = false;
      }
    }
    // In debt on the owner: it answers 429 until the debt is paid back (or the window ends).
    if (s.limit !== limit || s.indebted) return NO_SHARE;
    if (cost === 0) return s.left >= 1 ? s.left : NO_SHARE;
    if (cost > s.left) {
      s.misses = now - s.missedAt <= MISS_RUN_MS ? s.misses + 1 : 1;
      s.missedAt = now;
      return NO_SHARE;
    }
    s.left -= cost;
    s.spent += cost;
    s.usedAt = now;
    return s.left;
  }

  /** The share of `stateKey`, to mark a LEASE on its way; undefined when none is held. */
  entry(stateKey: string): Share | undefined {
    return this.shares.get(stateKey);
  }

  /**
   * Add what the owner granted for the window starting at `windowStart`; false when this node
   * has moved on from it (the grant is lost with its window). `keep`: an opening grant, kept
   * until the window ends like a share by rule (returnIdle passes it by).
   */
  grant(stateKey: string, windowStart: number, granted: number, now: number, epoch: number, keep = false): boolean {
    const s = this.shares.get(stateKey);
    // Granted on a connection this share no longer lives on: counted in a state it cannot spend against.
    // Granted before the owner's debt and arrived after its notice: spending it would answer past the debt.
    if (s === undefined || s.windowStart !== windowStart || s.epoch !== epoch || s.indebted) return false;
    if (granted === 0) {
      s.refused = true;
      return false;
    }
    // The earliest ask of what is held: a give-back names a moment before any of it was counted.
    if (s.granted === 0) s.grantedAt = now;
    s.left += granted;
    s.granted += granted;
    if (keep && !s.keep) {
      // A LEASE grant held when the opening one came is kept with it from now on.
      this.holding.delete(stateKey);
      s.keep = true;
      const ringKey = ringKeyOfStateKey(stateKey);
      const keys = this.kept.get(ringKey);
      if (keys !== undefined) keys.push(stateKey);
      else {
        this.kept.set(ringKey, [stateKey]);
        this.heldBytes += stringBytes(ringKey) + KEPT_OVERHEAD_BYTES;
      }
    } else if (!s.keep) this.holding.add(stateKey);
    return true;
  }

  /**
   * Whether a forward of `stateKey` for `limit` should ask its owner for an opening grant: its
   * share of that limit opened empty in this window (not by rule), is empty, and has not asked
   * yet. Marks it asked.
   */
  wantsOpening(stateKey: string, limit: number): boolean {
    const s = this.shares.get(stateKey);
    if (s === undefined || s.limit !== limit || s.ruled || s.opened || s.refused || s.asking || s.left > 0 || s.indebted) return false;
    s.opened = true;
    return true;
  }

  /**
   * The owner reset the identifier of `ringKey`: what its grants counted is gone from the
   * owner's count, so what is left of them here is dropped (the shares by rule stay: they are
   * held back by rule, reset or not).
   */
  forgetGrants(ringKey: string): void {
    const drop = (key: string): void => {
      const s = this.shares.get(key);
      if (s === undefined) return;
      s.left -= Math.min(s.left, s.granted);
      s.granted = 0;
      s.keep = false;
    };
    for (const key of this.holding) {
      if (ringKeyOfStateKey(key) !== ringKey) continue;
      drop(key);
      this.holding.delete(key);
    }
    const keys = this.kept.get(ringKey);
    if (keys === undefined) return;
    for (const key of keys) drop(key);
    this.kept.delete(ringKey);
    this.heldBytes -= stringBytes(ringKey) + KEPT_OVERHEAD_BYTES;
  }

  /**
   * The owner's count of `stateKey` is past the limit in the window starting at `windowStart`
   * (DEBT_NOTICE, a charge): nothing of that window is answered here from then on, neither
   * what is left of the share by rule nor a grant (a grant is not returned either: the owner
   * counted it, and the key is in debt). Requests go to the owner, which answers 429 until the
   * debt is paid back. An entry is made for a window not begun here yet, so that its share is
   * not taken afterwards; what was spent stays (foldOwned counts it if this node comes to own
   * the key). A later window, here already, is left alone: the debt ended with its window.
   */
  indebted(stateKey: string, windowStart: number, keepUntil: number, now: number): void {
    let s = this.shares.get(stateKey);
    if (s !== undefined && s.windowStart > windowStart) return;
    if (s === undefined) {
      // No room: take() cannot open a share of it either, so nothing is answered here anyway.
      s = this.insert(stateKey, now, newShare(windowStart, 0, keepUntil, now, 0));
      if (s === undefined) return;
      s.refused = true;
      s.opened = true;
      s.indebted = true;
      return;
    }
    if (s.windowStart < windowStart) {
      // The window before: what it spent was counted in it, and is done with.
      s.windowStart = windowStart;
      s.spent = 0;
      s.ruled = false;
    }
    if (s.keep) this.unkeep(stateKey);
    this.holding.delete(stateKey);
    s.keepUntil = Math.max(s.keepUntil, keepUntil);
    s.left = 0;
    s.granted = 0;
    s.keep = false;
    s.refused = true;
    s.indebted = true;
  }

  /**
   * Holds `entry` for `stateKey`, its bytes counted; undefined, and nothing held, when the
   * table is full even after a sweep of what has expired (the table's bound in bytes).
   */
  private insert(stateKey: string, now: number, entry: Share): Share | undefined {
    const bytes = stringBytes(stateKey) + ENTRY_OVERHEAD_BYTES;
    if (this.heldBytes + bytes > this.maxBytes && (this.sweep(now), this.heldBytes + bytes > this.maxBytes)) return undefined;
    this.shares.set(stateKey, entry);
    this.heldBytes += bytes;
    return entry;
  }

  /**
   * The owner's connection changed (`epoch`): nothing held of this window stands any more, the
   * share by rule included (its window was held back by a count the owner may have lost or
   * handed on). The window goes on empty (not by rule): its next request goes to the owner and
   * may bring an opening grant (wantsOpening).
   */
  private void(stateKey: string, s: Share, epoch: number): void {
    if (s.keep) this.unkeep(stateKey);
    this.holding.delete(stateKey);
    s.epoch = epoch;
    s.left = 0;
    s.granted = 0;
    s.spent = 0;
    s.ruled = false;
    s.opened = false;
    s.refused = false;
    s.keep = false;
  }

  /**
   * This node now owns the keys `owns` names: hand `fold(stateKey, requests)` what it answered
   * of their current windows from shares by rule (held back by the previous owner, so in no
   * count that moved here), and drop their shares. At most one share per key; grants spent are
   * counted too (they were in the moved count already: under-admitted by that much at worst).
   */
  foldOwned(owns: (ringKey: string) => boolean, now: number, fold: (stateKey: string, requests: number) => void): void {
    for (const [key, s] of this.shares) {
      if (!owns(ringKeyOfStateKey(key))) continue;
      const current = now < s.keepUntil - SHARE_KEEP_MS;
      const byRule = s.ruled ? Math.min(s.spent, Math.floor(s.limit / SHARE_DIVISOR)) : 0;
      if (current && byRule > 0) fold(key, byRule);
      if (s.keep) this.unkeep(key);
      this.holding.delete(key);
      this.shares.delete(key);
      this.heldBytes -= stringBytes(key) + ENTRY_OVERHEAD_BYTES;
    }
  }

  /** Take `stateKey` out of the kept-grant index (its window ended, or it is being dropped); the caller clears its `keep`. */
  private unkeep(stateKey: string): void {
    const ringKey = ringKeyOfStateKey(stateKey);
    const keys = this.kept.get(ringKey);
    if (keys === undefined) return;
    const i = keys.indexOf(stateKey);
    if (i >= 0) keys.splice(i, 1);
    if (keys.length > 0) return;
    this.kept.delete(ringKey);
    this.heldBytes -= stringBytes(ringKey) + KEPT_OVERHEAD_BYTES;
  }

  /**
   * Take back what is left of the grants of shares unused for `idleMs`: `give(stateKey, share,
   * requests)` returns them to the owner. Grants of a window that ended are forgotten.
   */
  returnIdle(now: number, idleMs: number, give: (stateKey: string, s: Share, requests: number) => void): void {
    for (const key of this.holding) {
      const s = this.shares.get(key);
      if (s === undefined || s.granted === 0) {
        this.holding.delete(key);
        continue;
      }
      if (now - s.usedAt < idleMs) continue;
      const back = Math.min(s.left, s.granted);
      this.holding.delete(key);
      s.granted = 0;
      if (back === 0 || now >= s.keepUntil - SHARE_KEEP_MS) continue;
      s.left -= back;
      give(key, s, back);
    }
  }

  /** Drop the shares whose window has ended (and SHARE_KEEP_MS more), once a second at most. */
  private sweep(now: number): void {
    if (now - this.sweptAt < SWEEP_EVERY_MS) return;
    this.sweptAt = now;
    for (const [key, s] of this.shares) {
      if (s.keepUntil > now) continue;
      if (s.keep) this.unkeep(key);
      this.shares.delete(key);
      this.holding.delete(key);
      this.heldBytes -= stringBytes(key) + ENTRY_OVERHEAD_BYTES;
    }
  }
}

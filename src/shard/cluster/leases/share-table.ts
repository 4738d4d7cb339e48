import { stringBytes } from "../../table/key-bytes.js";

/** What an entry costs beside its key string: the Map entry and the Share object (header and four number fields). */
const ENTRY_OVERHEAD_BYTES = 96;
/** A full table sweeps the ended windows at most this often: the sweep is a scan. */
const SWEEP_EVERY_MS = 1000;
/**
 * A share is kept this long past the end of its window as this node reads the owner's clock:
 * dropped earlier, a share could be taken again in a window it was already taken in, if the
 * clock offset estimate moved back by that much.
 */
export const SHARE_KEEP_MS = 5000;

interface Share {
  /** the window's start on the owner's clock (unix ms) */
  windowStart: number;
  /** the limit the share was taken for: another limit asks the owner */
  limit: number;
  /** requests this node may still answer from it */
  left: number;
  /** unix ms on this node's clock after which the entry may go (SHARE_KEEP_MS past its window) */
  keepUntil: number;
}

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
   * fresh one of `share` requests when `mayOpen`. Returns what is left after the request, or
   * NO_SHARE when it must go to the owner.
   */
  take(stateKey: string, windowStart: number, keepUntil: number, limit: number, share: number, cost: number, mayOpen: boolean, now: number): number {
    let s = this.shares.get(stateKey);
    if (s === undefined || s.windowStart !== windowStart) {
      // A later window already open here: the owner's clock, as read, went back.
      if (!mayOpen || (s !== undefined && s.windowStart > windowStart)) return NO_SHARE;
      if (s === undefined) {
        const bytes = stringBytes(stateKey) + ENTRY_OVERHEAD_BYTES;
        if (this.heldBytes + bytes > this.maxBytes && (this.sweep(now), this.heldBytes + bytes > this.maxBytes)) return NO_SHARE;
        s = { windowStart, limit, left: share, keepUntil };
        this.shares.set(stateKey, s);
        this.heldBytes += bytes;
      } else {
        s.windowStart = windowStart;
        s.limit = limit;
        s.left = share;
        s.keepUntil = keepUntil;
      }
    }
    if (s.limit !== limit) return NO_SHARE;
    if (cost === 0) return s.left >= 1 ? s.left : NO_SHARE;
    if (cost > s.left) return NO_SHARE;
    s.left -= cost;
    return s.left;
  }

  /** Drop the shares whose window has ended (and SHARE_KEEP_MS more), once a second at most. */
  private sweep(now: number): void {
    if (now - this.sweptAt < SWEEP_EVERY_MS) return;
    this.sweptAt = now;
    for (const [key, s] of this.shares) {
      if (s.keepUntil > now) continue;
      this.shares.delete(key);
      this.heldBytes -= stringBytes(key) + ENTRY_OVERHEAD_BYTES;
    }
  }
}

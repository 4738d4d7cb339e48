// Which unauthenticated connections a server holds. Anyone who can reach the
// peer port can open connections, so they are bounded overall and per source
// address. At a bound the OLDEST unauthenticated connection is closed (one
// that has sent nothing first), never the new one: a flood of idle
// connections cannot keep a restarting member out, because the member's
// connection sends its HELLO at once and completes in one round trip, long
// before a flood could push it to the front of the queue. (With the newcomer
// refused instead, 264 idle connections kept a restarted member out for good.)

import type net from "node:net";

/** An unauthenticated connection: in the peer handshake, or under TLS still in the TLS handshake. */
export interface PendingConnection {
  readonly source: string;
  /** whether any byte has arrived: silent connections are evicted first */
  readonly heardFrom: boolean;
  /** close it, counted under `reason` */
  reject(reason: string, message: string): void;
}

export class PendingConnections {
  /** evictions so far */
  evicted = 0;
  /** oldest first (a Set iterates in insertion order) */
  private readonly all = new Set<PendingConnection>();
  private readonly bySource = new Map<string, number>();

  constructor(
    private readonly maxTotal: number,
    private readonly maxPerSource: number,
  ) {}

  get size(): number {
    return this.all.size;
  }

  /** Make room for a new connection from `source`: evict the oldest where a bound is reached. */
  makeRoom(source: string): void {
    if ((this.bySource.get(source) ?? 0) >= this.maxPerSource) this.evictOldest(source);
    else if (this.all.size >= this.maxTotal) this.evictOldest(undefined);
  }

  add(c: PendingConnection): void {
    this.all.add(c);
    this.bySource.set(c.source, (this.bySource.get(c.source) ?? 0) + 1);
  }

  /** Idempotent: a connection leaves once, authenticated or closed. */
  remove(c: PendingConnection): void {
    if (!this.all.delete(c)) return;
    const n = (this.bySource.get(c.source) ?? 1) - 1;
    if (n === 0) this.bySource.delete(c.source);
    else this.bySource.set(c.source, n);
  }

  /** Runs only at a bound, over at most maxTotal connections. */
  private evictOldest(source: string | undefined): void {
    let oldest: PendingConnection | undefined;
    for (const c of this.all) {
      if (source !== undefined && c.source !== source) continue;
      if (!c.heardFrom) {
        oldest = c;
        break;
      }
      oldest ??= c;
    }
    if (oldest === undefined) return;
    this.evicted++;
    this.remove(oldest);
    oldest.reject("evicted", "unauthenticated connection evicted for a newer one");
  }
}

/**
 * A TCP connection to a TLS listener whose TLS handshake has not finished: held in the
 * same bounds. The raw socket is TLS's to read, so "heard from" is its byte count.
 */
export class TlsHandshaking implements PendingConnection {
  constructor(
    readonly raw: net.Socket,
    readonly source: string,
    private readonly onReject: (reason: string) => void,
  ) {}

  get heardFrom(): boolean {
    return this.raw.bytesRead > 0;
  }

  reject(reason: string): void {
    this.onReject(reason);
    this.raw.destroy();
  }
}

import { RLS_SERVICE_NAME } from "./wire/protos.js";

/** grpc.health.v1.HealthCheckResponse.ServingStatus */
export const SERVING = 1;
export const NOT_SERVING = 2;
export const SERVICE_UNKNOWN = 3;

/** How often Watch streams look at readiness; a change reaches watchers within this many ms. */
const WATCH_INTERVAL_MS = 1000;
/**
 * Watch streams need no key, so they are bounded: per connection (a prober watches once or
 * twice) and per node. Past either, Watch answers RESOURCE_EXHAUSTED.
 */
export const MAX_WATCHES_PER_CONNECTION = 8;
export const MAX_WATCHES = 1024;
/** Watchers told of a change per event-loop turn: a change never holds the loop for all of them. */
const FAN_OUT_PER_TURN = 64;

interface Watcher {
  send(status: number): void;
  end(): void;
  last: number;
}

/**
 * The standard gRPC health service (grpc.health.v1), whatever carries it: SERVING while the
 * node is ready (what GET /ready says: a member of a ring with a quorum, not draining),
 * NOT_SERVING otherwise, for the server as a whole ("") and for the rate limit service by
 * name. Any other name is unknown: Check answers NOT_FOUND and Watch SERVICE_UNKNOWN, as the
 * protocol asks.
 */
export class HealthService {
  private readonly watchers = new Set<Watcher>();
  private timer: NodeJS.Timeout | undefined;
  /** a fan-out in progress: the watchers left to tell, from `next` on */
  private pending: Watcher[] = [];
  private next = 0;
  private scheduled = false;
  /** the status the last poll saw: an unchanged one tells nobody */
  private polled: number | undefined;

  constructor(private readonly isReady: () => boolean) {}

  /** The status of `service`, or undefined when it is not one this server knows. */
  status(service: string | undefined): number | undefined {
    if (service !== undefined && service !== "" && service !== RLS_SERVICE_NAME) return undefined;
    return this.isReady() ? SERVING : NOT_SERVING;
  }

  /** Whether another watcher fits under MAX_WATCHES. */
  get full(): boolean {
    return this.watchers.size >= MAX_WATCHES;
  }

  /**
   * Sends the status now and on every change until the returned function is called (or
   * close()); undefined, and nothing sent, when MAX_WATCHES watchers are open already.
   */
  watch(send: (status: number) => void, end: () => void): (() => void) | undefined {
    // invariant: watchers.size <= MAX_WATCHES
    if (this.full) return undefined;
    const watcher: Watcher = { send, end, last: this.status("")! };
    send(watcher.last);
    this.watchers.add(watcher);
    this.timer ??= setInterval(() => this.poll(), WATCH_INTERVAL_MS).unref();
    return () => {
      this.watchers.delete(watcher);
      if (this.watchers.size === 0 && this.timer !== undefined) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    };
  }

  /** Tells watchers of a change (the node starts draining), FAN_OUT_PER_TURN of them per event-loop turn. */
  poll(): void {
    const now = this.status("")!;
    if (now === this.polled && this.pending.length === 0) return;
    this.polled = now;
    this.pending = [...this.watchers];
    this.next = 0;
    if (!this.scheduled) this.fanOut();
  }

  private fanOut(): void {
    this.scheduled = false;
    const now = this.status("")!;
    const end = Math.min(this.pending.length, this.next + FAN_OUT_PER_TURN);
    for (; this.next < end; this.next++) {
      const w = this.pending[this.next]!;
      if (w.last === now || !this.watchers.has(w)) continue;
      w.last = now;
      w.send(now);
    }
    if (this.next < this.pending.length) {
      this.scheduled = true;
      setImmediate(() => this.fanOut());
    } else this.pending = [];
  }

  /** Ends every Watch stream (at shutdown). */
  close(): void {
    for (const w of this.watchers) w.end();
    this.watchers.clear();
    this.pending = [];
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}

import { RLS_SERVICE_NAME } from "./wire/protos.js";

/** grpc.health.v1.HealthCheckResponse.ServingStatus */
export const SERVING = 1;
export const NOT_SERVING = 2;
export const SERVICE_UNKNOWN = 3;

/** How often Watch streams look at readiness; a change reaches watchers within this many ms. */
const WATCH_INTERVAL_MS = 1000;

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

  constructor(private readonly isReady: () => boolean) {}

  /** The status of `service`, or undefined when it is not one this server knows. */
  status(service: string | undefined): number | undefined {
    if (service !== undefined && service !== "" && service !== RLS_SERVICE_NAME) return undefined;
    return this.isReady() ? SERVING : NOT_SERVING;
  }

  /** Sends the status now and on every change until the returned function is called (or close()). */
  watch(send: (status: number) => void, end: () => void): () => void {
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

  /** Tells watchers of a change at once (the node starts draining). */
  poll(): void {
    const now = this.status("")!;
    for (const w of this.watchers) {
      if (w.last === now) continue;
      w.last = now;
      w.send(now);
    }
  }

  /** Ends every Watch stream (at shutdown). */
  close(): void {
    for (const w of this.watchers) w.end();
    this.watchers.clear();
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}

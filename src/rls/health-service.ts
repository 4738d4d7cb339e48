import type { ServerUnaryCall, ServerWritableStream, sendUnaryData, UntypedServiceImplementation } from "@grpc/grpc-js";
import { RLS_SERVICE_NAME } from "./protos.js";

/** grpc.health.v1.HealthCheckResponse.ServingStatus */
const SERVING = 1;
const NOT_SERVING = 2;
const SERVICE_UNKNOWN = 3;
const NOT_FOUND = 5;

/** How often a Watch stream looks at readiness; a change reaches watchers within this many ms. */
const WATCH_INTERVAL_MS = 1000;

/**
 * The standard gRPC health service (grpc.health.v1): SERVING while the node is ready (what
 * GET /ready says: a member of a ring with a quorum, not draining), NOT_SERVING otherwise,
 * for the server as a whole ("") and for the rate limit service by name. Check answers
 * NOT_FOUND and Watch SERVICE_UNKNOWN for any other name, as the protocol asks.
 */
export class HealthService {
  private readonly watchers = new Set<{ stream: ServerWritableStream<{ service?: string }, { status: number }>; last: number }>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly isReady: () => boolean) {}

  private status(): number {
    return this.isReady() ? SERVING : NOT_SERVING;
  }

  implementation(): UntypedServiceImplementation {
    return {
      Check: (call: ServerUnaryCall<{ service?: string }, { status: number }>, callback: sendUnaryData<{ status: number }>) => {
        if (!known(call.request.service)) return callback({ code: NOT_FOUND, details: `unknown service "${call.request.service}"` });
        callback(null, { status: this.status() });
      },
      Watch: (stream: ServerWritableStream<{ service?: string }, { status: number }>) => {
        if (!known(stream.request.service)) {
          stream.write({ status: SERVICE_UNKNOWN });
          return;
        }
        const watcher = { stream, last: this.status() };
        stream.write({ status: watcher.last });
        this.watchers.add(watcher);
        stream.on("cancelled", () => this.unwatch(watcher));
        stream.on("close", () => this.unwatch(watcher));
        this.timer ??= setInterval(() => this.poll(), WATCH_INTERVAL_MS).unref();
      },
    };
  }

  /** Called when the node starts draining, so watchers hear NOT_SERVING at once. */
  poll(): void {
    const now = this.status();
    for (const w of this.watchers) {
      if (w.last === now) continue;
      w.last = now;
      w.stream.write({ status: now });
    }
  }

  /** Ends every Watch stream (at shutdown). */
  close(): void {
    for (const w of this.watchers) w.stream.end();
    this.watchers.clear();
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private unwatch(watcher: { stream: unknown; last: number }): void {
    this.watchers.delete(watcher as never);
    if (this.watchers.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}

function known(service: string | undefined): boolean {
  return service === undefined || service === "" || service === RLS_SERVICE_NAME;
}

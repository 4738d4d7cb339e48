import type { Expiring } from "./deadlines.js";
import { MAX_ANSWER_BYTES } from "./validate.js";
import type { NodeConnection } from "./node-connection.js";
import type { ChargeRequest, ChargeResult, LimitRequest, LimitResult, RateLimitHeaders, ReleaseRequest, ResetRequest, ResetResult } from "./types.js";

const RING_VERSION = "ringlimit-ring-version";

/** What a check asks, and the index of its path in NodeConnection.paths. */
export const enum CheckKind {
  LIMIT = 0,
  BATCH = 1,
  RESET = 2,
  CHARGE = 3,
  RELEASE = 4,
}
export type Result = LimitResult | ResetResult | ChargeResult;

/** What each CheckKind sends, for reports. */
export const CHECK_NAMES = ["POST /limit", "POST /limit/batch", "POST /limit/reset", "POST /limit/charge", "POST /limit/release"] as const;

/** Where checks and their HTTP exchanges report (the client). */
export interface CheckHandler {
  onAnswer(attempt: Attempt, status: number, headers: RateLimitHeaders, version: string | undefined, body: Buffer): void;
  onFailure(attempt: Attempt): void;
  onExpired(check: Check): void;
}

/** One limit() in flight: its deadline, the nodes it tried, and how to resolve it. */
export class Check implements Expiring {
  settled = false;
  attempt: Attempt | undefined = undefined;
  readonly tried: NodeConnection[] = [];
  /** performance.now() ms; set when the check is sent (after discovery, for a check issued before it) */
  deadline = 0;
  /** the owner on the view it was routed by, when known */
  owner: NodeConnection | undefined = undefined;

  constructor(
    private readonly client: CheckHandler,
    readonly kind: CheckKind,
    readonly request: LimitRequest | ResetRequest | ChargeRequest | ReleaseRequest,
    readonly body: string,
    /** effective namespace (of the first item, for a batch) */
    readonly namespace: string,
    /** ring key, or one per item of a batch */
    readonly ringKey: string | readonly string[],
    readonly stateKey: string | undefined,
    /** unix ms, for the blocked cache */
    readonly sentAt: number,
    readonly resolve: (result: Result) => void,
  ) {}

  expire(): void {
    this.client.onExpired(this);
  }
}

/**
 * One HTTP exchange of a check with one node: an undici dispatch handler (the low-level
 * API: raw headers, no body stream, no promise per request).
 */
export class Attempt {
  aborted = false;
  /** performance.now() ms when it was handed to the node's pool */
  readonly sentAt = performance.now();
  private abortRequest: ((err?: Error) => void) | undefined = undefined;
  private status = 0;
  private version: string | undefined = undefined;
  private readonly headers: RateLimitHeaders = {};
  private chunk: Buffer | undefined = undefined;
  private chunks: Buffer[] | undefined = undefined;
  private bytes = 0;

  constructor(
    private readonly client: CheckHandler,
    readonly check: Check,
    readonly node: NodeConnection,
  ) {}

  abort(): void {
    this.aborted = true;
    this.abortRequest?.(new Error("ringlimit check timed out"));
  }

  onConnect(abort: (err?: Error) => void): void {
    // Still queued in the pool when its check expired: never sent.
    if (this.aborted) return abort(new Error("ringlimit check timed out"));
    this.abortRequest = abort;
  }

  onHeaders(status: number, raw: Buffer[]): boolean {
    this.status = status;
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const name = raw[i]!;
      // Only the four names the client passes on or reads; compared by length first.
      switch (name.length) {
        case 22:
          if (name.toString("latin1").toLowerCase() === RING_VERSION) this.version = raw[i + 1]!.toString("latin1");
          break;
        case 9:
          if (name.toString("latin1").toLowerCase() === "ratelimit") this.headers.ratelimit = raw[i + 1]!.toString("latin1");
          break;
        case 16:
          if (name.toString("latin1").toLowerCase() === "ratelimit-policy") this.headers["ratelimit-policy"] = raw[i + 1]!.toString("latin1");
          break;
        case 11:
          if (name.toString("latin1").toLowerCase() === "retry-after") this.headers["retry-after"] = raw[i + 1]!.toString("latin1");
          break;
      }
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    // A body longer than any answer of a node is not read on: the exchange fails.
    this.bytes += chunk.length;
    if (this.bytes > MAX_ANSWER_BYTES) {
      this.abortRequest?.(new Error("ringlimit answer too long"));
      return false;
    }
    if (this.chunk === undefined) this.chunk = chunk;
    else (this.chunks ??= [this.chunk]).push(chunk);
    return true;
  }

  onComplete(): void {
    const body = this.chunks !== undefined ? Buffer.concat(this.chunks) : (this.chunk ?? Buffer.alloc(0));
    this.client.onAnswer(this, this.status, this.headers, this.version, body);
  }

  onError(): void {
    this.client.onFailure(this);
  }
}

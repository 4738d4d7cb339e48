import { Pool } from "undici";
import type { RingLimitClientOptions } from "./types.js";

/**
 * An unreachable node is skipped for retryNodeAfterMs, doubling while it stays unreachable,
 * up to this: a cluster that comes back is used again within 5 s.
 */
const MAX_SKIP_MS = 5_000;

/**
 * One ringlimit node as the client reaches it: a keep-alive undici Pool to its origin, the
 * paths of its routes (a URL may carry a path prefix), and whether it is being skipped
 * after failing to answer.
 */
export class NodeConnection {
  readonly pool: Pool;
  /** POST paths by CheckKind: /limit, /limit/batch, /limit/reset, /limit/charge, /limit/release */
  readonly paths: readonly [string, string, string, string, string];
  readonly clusterPath: string;
  /** performance.now() until which checks skip this node */
  skipUntil = 0;
  /** performance.now() ms of its last answer (any status), -Infinity before the first */
  private lastAnswerAt = -Infinity;
  private skipMs: number;
  private readonly healthPath: string;
  private warming: Promise<void> | undefined;

  constructor(
    /** normalised: origin + path prefix, no trailing slash */
    readonly url: string,
    options: Pick<RingLimitClientOptions, "connections" | "tls">,
    private readonly retryAfterMs: number,
  ) {
    const u = new URL(url);
    const base = u.pathname.replace(/\/+$/, "");
    this.paths = [base + "/limit", base + "/limit/batch", base + "/limit/reset", base + "/limit/charge", base + "/limit/release"];
    this.clusterPath = base + "/cluster";
    this.healthPath = base + "/health";
    this.skipMs = retryAfterMs;
    const tls = options.tls;
    this.pool = new Pool(u.origin, {
      connections: options.connections ?? 16,
      pipelining: 1,
      ...(tls !== undefined && u.protocol === "https:"
        ? {
            connect: {
              ...(tls.ca !== undefined ? { ca: tls.ca as string | Buffer | (string | Buffer)[] } : {}),
              ...(tls.rejectUnauthorized !== undefined ? { rejectUnauthorized: tls.rejectUnauthorized } : {}),
              ...(tls.servername !== undefined ? { servername: tls.servername } : {}),
            },
          }
        : {}),
    });
  }

  /**
   * Open a keep-alive connection before the first check needs one: a GET /health (no key
   * sent), whose connection stays in the pool. A check on a cold connection pays TCP (and
   * TLS) set-up inside its deadline; measured at load average 28, first checks on fresh
   * connections took 90-150 ms against the default timeoutMs of 50. Resolves either way.
   */
  warm(timeoutMs: number): Promise<void> {
    this.warming ??= this.pool
      .request({ path: this.healthPath, method: "GET", headersTimeout: timeoutMs, bodyTimeout: timeoutMs })
      .then((r) => r.body.dump())
      .then(
        () => {},
        () => {},
      );
    return this.warming;
  }

  isSkipped(now: number): boolean {
    return now < this.skipUntil;
  }

  /** It refused, reset or did not answer in time. */
  failed(now: number): void {
    if (now < this.skipUntil) return;
    this.skipUntil = now + this.skipMs;
    this.skipMs = Math.min(this.skipMs * 2, MAX_SKIP_MS);
  }

  answered(): void {
    this.lastAnswerAt = performance.now();
    this.skipUntil = 0;
    this.skipMs = this.retryAfterMs;
  }

  /** Whether it answered anything at or after `t` (performance.now() ms): its event loop runs. */
  answeredSince(t: number): boolean {
    return this.lastAnswerAt >= t;
  }

  close(): Promise<void> {
    return this.pool.destroy().catch(() => {});
  }
}

/** `http://h:1/p/` and `http://h:1/p` are one node; credentials, query and fragment are refused. */
export function normaliseUrl(url: string): string {
  const u = new URL(url);
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new TypeError(`ringlimit URL must be http(s): ${url}`);
  if (u.username !== "" || u.password !== "" || u.search !== "" || u.hash !== "")
    throw new TypeError(`ringlimit URL must not carry credentials, query or fragment: ${url}`);
  return u.origin + u.pathname.replace(/\/+$/, "");
}

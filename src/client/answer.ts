import type { AnswerSource, LimitData, LimitRequest, LimitResult, RateLimitHeaders, ResetResult } from "./types.js";

/**
 * A node's answer as limit() returns it. The body is parsed only when `data` is read: a
 * caller that looks at `allowed` alone (most middleware does) never pays JSON.parse.
 */
export class NodeAnswer implements LimitResult {
  private parsed: LimitData | undefined | null = null;

  constructor(
    readonly allowed: boolean,
    readonly degraded: boolean,
    readonly status: number,
    readonly headers: RateLimitHeaders,
    readonly source: AnswerSource,
    private readonly body: Buffer,
  ) {}

  get data(): LimitData | undefined {
    if (this.parsed === null) this.parsed = parseData(this.body);
    return this.parsed;
  }

  toJSON(): LimitResult {
    return { allowed: this.allowed, degraded: this.degraded, status: this.status, data: this.data, headers: this.headers, source: this.source };
  }
}

/** The envelope's `data`, or undefined when the body is not a JSON envelope. */
export function parseData(body: Buffer): LimitData | undefined {
  try {
    const data = (JSON.parse(body.toString("utf8")) as { data?: unknown } | null)?.data;
    return typeof data === "object" && data !== null ? (data as LimitData) : undefined;
  } catch {
    return undefined;
  }
}

export function resetAnswer(status: number, data: LimitData | undefined, source: AnswerSource): ResetResult {
  return { ok: status === 200, status, data: data as ResetResult["data"], source };
}

/** No node answered: the client's own answer. */
export function clientAnswer(allowed: boolean, status = 0): LimitResult {
  return { allowed, degraded: true, status, data: undefined, headers: {}, source: "client" };
}

/** A 429 from the client's memory of an earlier one (docs/client.md), in the shape the node would have sent. */
export function cachedBlockAnswer(request: LimitRequest, namespace: string, now: number, until: number, resetTime: number): LimitResult {
  const algorithm = request.algorithm ?? "fixed-window";
  const retryAfterMs = until - now;
  const secondsToReset = Math.max(0, resetTime - Math.floor(now / 1000));
  return {
    allowed: false,
    degraded: false,
    status: 429,
    data: {
      error: "Rate limit exceeded",
      status: 429,
      namespace,
      identifier: request.identifier,
      limit: request.limit,
      remaining: 0,
      reset_time: resetTime,
      retry_after: retryAfterMs / 1000,
    },
    headers: {
      "ratelimit-policy": `"${algorithm}";q=${request.limit};w=${request.duration}`,
      ratelimit: `"${algorithm}";r=0;t=${secondsToReset}`,
      "retry-after": String(Math.max(1, Math.ceil(retryAfterMs / 1000))),
    },
    source: "cache",
  };
}

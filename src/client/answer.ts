import type { AnswerSource, ChargeRequest, ChargeResult, LimitData, LimitRequest, LimitResult, RateLimitHeaders, Reservation, ResetResult } from "./types.js";

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

/**
 * A node's answer to POST /limit/charge. `counted` is true on a 200 (the node's owner counted
 * it), false when a node refused it (4xx: a bad cost, a wrong key) or answered that its owner
 * could not be reached (503), and "unknown" when no answer came back: the charge may have been
 * counted once. A charge without an id is never sent twice by the client, so it is never counted
 * twice; one with an id may be sent twice (chargeOnce), and its owner counts it once.
 */
export function chargeAnswer(status: number, body: Buffer | undefined, headers: RateLimitHeaders, source: AnswerSource): ChargeResult {
  const data = body === undefined ? undefined : parseData(body);
  return { counted: status === 200 ? true : status === 0 ? "unknown" : false, status, data, headers, source };
}

/** POST /limit/charge's body for a request: its `chargeId` travels as `charge_id`. */
export type ChargeBody = Omit<ChargeRequest, "chargeId"> & { charge_id?: string };

/**
 * charge() (docs/client.md): sent once; with a `chargeId`, sent once more when its answer was lost
 * (no answer: status 0; or a 503, which a node answers when the owner's answer did not come back
 * in time, and the owner may have counted it). The owner counts a charge with an id at most once,
 * so the second answer says for both: a 200 (the first counted, `duplicate`, or this one) is
 * counted true; anything else counts as before. Never more than two sends.
 */
export async function chargeOnce(send: (body: ChargeBody) => Promise<ChargeResult>, request: ChargeRequest): Promise<ChargeResult> {
  const { chargeId, ...rest } = request;
  if (chargeId === undefined) return send(rest);
  const body: ChargeBody = { ...rest, charge_id: chargeId };
  const first = await send(body);
  if (first.status !== 0 && first.status !== 503) return first;
  return { ...(await send(body)), retried: true };
}

/** A charge id for settle(): random, so a retried settle is counted once (RFC 9562 version 4, 36 characters). */
const newChargeId = (): string => globalThis.crypto.randomUUID();

/** What reserve() and settle() need of the client. */
interface Charging {
  limit(request: LimitRequest): Promise<LimitResult>;
  charge(request: ChargeRequest): Promise<ChargeResult>;
}

/**
 * Reserve-then-settle (docs/client.md): limit() with the estimated cost, then settle(actual)
 * charges the difference (a refund when the estimate was larger). A reservation the service
 * refused counted nothing, and settle() reports nothing. One that failed open (degraded) may
 * not have been counted: settle() charges the whole actual cost, what was surely spent. settle()
 * sends its charge with a random charge id, so a lost answer is retried once, counted once.
 */
export async function reserve(client: Charging, request: LimitRequest & { cost: number }): Promise<Reservation> {
  const result = await client.limit(request);
  let settled = false;
  const settle = (actual: number): Promise<ChargeResult | undefined> => {
    if (settled || !result.allowed) return Promise.resolve(undefined);
    settled = true;
    const cost = result.degraded ? actual : actual - request.cost;
    if (cost === 0) return Promise.resolve(undefined);
    // With an id of its own: a settle whose answer was lost is retried once and counted once.
    return client.charge({ ...request, cost, chargeId: newChargeId() });
  };
  return {
    allowed: result.allowed,
    degraded: result.degraded,
    status: result.status,
    data: result.data,
    headers: result.headers,
    source: result.source,
    settle,
  };
}

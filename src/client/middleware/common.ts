import { createHash } from "node:crypto";
import { REQUEST_BOUNDS } from "../../decision.js";
import type { RingLimitClient } from "../client.js";
import type { AlgorithmName, ChargeResult, LimitResult } from "../types.js";

/** One limit a route applies: the POST /limit fields, and where the identifier comes from. */
export interface RateLimitRule<Req> {
  namespace: string;
  product?: string;
  /** requests per window */
  limit: number;
  /** seconds */
  duration: number;
  algorithm?: AlgorithmName;
  /**
   * Limit requests in flight instead (docs/client.md, Concurrency): `limit` slots, `duration`
   * the lease lifetime in seconds; a slot is released when the response finishes or the
   * connection closes, errors included (`algorithm` is then concurrency).
   */
  concurrency?: boolean;
  /**
   * "after": the route reports its cost once it knows it (tokens of an LLM answer): the request
   * is checked with `estimate`, and the handler's `settle(actual)` (RouteCost) charges or
   * refunds the difference. Fails open as limit(); a check that failed open charges the whole actual.
   */
  cost?: "after";
  /** with `cost: "after"`: the cost checked before the handler runs (default 1) */
  estimate?: number;
  /**
   * The name of this rule's item in RateLimit and RateLimit-Policy (default: the service's,
   * the algorithm). A second rule on the route appends its own item; a name already there gets -2, -3...
   */
  policy?: string;
  /** the caller's identifier (an API key, a user id, an address); undefined: this request is not limited */
  key: (request: Req) => string | undefined | Promise<string | undefined>;
}

export interface RateLimitMiddlewareOptions<Req> extends RateLimitRule<Req> {
  client: RingLimitClient;
}

/** What the middleware does with one request: headers to set, and either go on or answer. */
export interface Verdict {
  pass: boolean;
  status: number;
  headers: [name: string, value: string][];
  /** JSON text when !pass */
  body: string;
  /** with `cost: "after"` and pass: the reservation's settle */
  settle?: (actual: number) => Promise<ChargeResult | undefined>;
}

const PASS: Verdict = Object.freeze({ pass: true, status: 200, headers: [], body: "" }) as Verdict;

/**
 * Check one request against its rule. Identifiers come from requests, so one longer than
 * the service accepts is replaced by its SHA-256 rather than sent to be refused: a caller
 * cannot make its own checks fail by sending a long key.
 */
export async function checkRequest<Req>(client: RingLimitClient, rule: RateLimitRule<Req>, request: Req): Promise<Verdict> {
  const identifier = await identifierOf(rule, request);
  if (identifier === undefined) return PASS;
  const check = {
    namespace: rule.namespace,
    ...(rule.product !== undefined ? { product: rule.product } : {}),
    identifier,
    limit: rule.limit,
    duration: rule.duration,
    ...(rule.algorithm !== undefined ? { algorithm: rule.algorithm } : {}),
  };
  const policy = { algorithm: rule.algorithm ?? "fixed-window", limit: rule.limit, duration: rule.duration };
  if (rule.cost !== "after") return verdictOf(await client.limit(check), policy);
  const reservation = await client.reserve({ ...check, cost: rule.estimate ?? 1 });
  const verdict = verdictOf(reservation, policy);
  return verdict.pass ? { ...verdict, settle: reservation.settle } : verdict;
}

/** The identifier a rule gives a request: "(empty)" for an empty one, a SHA-256 for one too long; undefined: not limited. */
export async function identifierOf<Req>(rule: RateLimitRule<Req>, request: Req): Promise<string | undefined> {
  const identifier = await rule.key(request);
  if (identifier === undefined) return undefined;
  if (identifier.length === 0) return "(empty)";
  return identifier.length > REQUEST_BOUNDS.identifier.max ? "sha256:" + createHash("sha256").update(identifier).digest("base64url") : identifier;
}

/** The limit a rule configures, as its RateLimit-Policy item says it. */
export interface RulePolicy {
  algorithm: AlgorithmName;
  limit: number;
  duration: number;
}

/**
 * The IETF headers of the answer are passed on as they came (draft-ietf-httpapi-ratelimit-headers).
 * An answer without them (the client answered itself: no node answered; or a node failing
 * closed) keeps the configured limit's items, marked with the boolean parameter `degraded`
 * (RFC 8941): a route with several limits shows every one of them whether the cluster answers
 * or not. Its `r` is what the request could spend without the service: the whole quota when
 * it was admitted unchecked (nothing was counted), 0 when refused; no `t`, as no window is known.
 */
export function verdictOf(result: LimitResult, policy?: RulePolicy): Verdict {
  const headers: [string, string][] = [];
  const h = result.headers;
  if (h["ratelimit-policy"] !== undefined) headers.push(["RateLimit-Policy", h["ratelimit-policy"]]);
  else if (result.degraded && policy !== undefined) headers.push(["RateLimit-Policy", `"${policy.algorithm}";q=${policy.limit};w=${policy.duration};degraded`]);
  if (h.ratelimit !== undefined) headers.push(["RateLimit", h.ratelimit]);
  else if (result.degraded && policy !== undefined) headers.push(["RateLimit", `"${policy.algorithm}";r=${result.allowed ? policy.limit : 0};degraded`]);
  if (result.allowed) return { pass: true, status: 200, headers, body: "" };
  if (result.status === 429) {
    if (h["retry-after"] !== undefined) headers.push(["Retry-After", h["retry-after"]]);
    const d = result.data;
    const body = JSON.stringify({
      error: "Rate limit exceeded",
      status: 429,
      limit: d?.limit,
      remaining: 0,
      reset_time: d?.reset_time,
      retry_after: d?.retry_after,
    });
    return { pass: false, status: 429, headers, body };
  }
  // Failing closed (failOpen: false and no node answered), or the service refused the check
  // itself (a wrong API key): the request cannot be admitted, and it is not the caller's fault.
  return { pass: false, status: 503, headers, body: JSON.stringify({ error: "Rate limit check unavailable", status: 503 }) };
}

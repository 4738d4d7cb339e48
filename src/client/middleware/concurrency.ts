import type { RingLimitClient } from "../client.js";
import { identifierOf, verdictOf, type RateLimitRule, type Verdict } from "./common.js";

/** A request's slot: the verdict, and the release to run when its response is done (idempotent; nothing to do without a slot). */
export interface Slot {
  verdict: Verdict;
  release: () => void;
}

const NO_SLOT = (): void => {};
const PASS: Slot = Object.freeze({ verdict: Object.freeze({ pass: true, status: 200, headers: [], body: "" }) as Verdict, release: NO_SLOT });

/**
 * A rule with `concurrency: true` (docs/client.md, Concurrency): hold one of `limit` slots for
 * the request, fail open as limit() does. The caller runs `release` once the response has
 * finished or the connection closed, errors included; a slot never released lapses after
 * `duration` seconds (up to a quarter more, docs/api.md).
 */
export async function acquireSlot<Req>(client: RingLimitClient, rule: RateLimitRule<Req>, request: Req): Promise<Slot> {
  const identifier = await identifierOf(rule, request);
  if (identifier === undefined) return PASS;
  const a = await client.acquire({
    namespace: rule.namespace,
    ...(rule.product !== undefined ? { product: rule.product } : {}),
    identifier,
    limit: rule.limit,
    duration: rule.duration,
  });
  return { verdict: verdictOf(a.result, { algorithm: "concurrency", limit: rule.limit, duration: rule.duration }), release: () => void a.release() };
}

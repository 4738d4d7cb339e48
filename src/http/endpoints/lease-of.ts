import { concurrency } from "../../algorithms/concurrency.js";
import type { Decision, LimitQuery } from "../../decision.js";
import type { LeaseTokens } from "../../leases/lease-token.js";

/**
 * The lease of an allowed decision when it holds a concurrency slot; undefined otherwise. A
 * fail-open or shadow answer holds no slot, and a peek none either, so they carry no lease: a
 * release of a slot never held could free someone else's.
 */
export function leaseFor(leases: LeaseTokens, q: LimitQuery, d: Decision): string | undefined {
  const algorithm = d.applied !== null ? d.applied.algorithm : q.algorithm;
  if (algorithm !== concurrency || !d.allowed || d.degraded !== null || d.shadow || q.cost === 0) return undefined;
  return leases.mint(q.namespace, q.identifier, q.duration, d.resetTime);
}

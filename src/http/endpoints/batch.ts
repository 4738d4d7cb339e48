import { failOpenBatch, type BatchOutcome, type Decision, type LimitQuery } from "../../decision.js";
import type { Endpoint } from "../endpoint.js";
import { allowedFields, blockedResultFields, ENVELOPE, envelopeHead, jsonHeaders, RATE_LIMITED_FIELDS, requestTail } from "../envelope.js";
import { Errors } from "../errors.js";
import { toBatchQueries } from "../validation.js";
import type { LeaseTokens } from "../../leases/lease-token.js";
import { leaseFor } from "./lease-of.js";

/** POST /limit/batch: 100 requests of up to ~1 KiB each (docs/api.md). */
export const MAX_BATCH_BODY_BYTES = 128 * 1024;

/** POST /limit/batch: 1 to 100 requests decided all or nothing (docs/api.md). */
export const batchEndpoint: Endpoint<readonly LimitQuery[], BatchOutcome> = {
  path: "/limit/batch",
  maxBodyBytes: MAX_BATCH_BODY_BYTES,
  parse(body) {
    const result = toBatchQueries(body);
    return result.ok ? { ok: true, query: result.queries } : result;
  },
  // All or nothing, like the batch itself: one item outside the key's scope refuses it.
  admits(scope, queries) {
    for (const q of queries) if (!scope.admits(q.namespace)) return false;
    return true;
  },
  decideNow: () => undefined,
  decide: (decider, queries, now, done) => decider.decideBatch(queries, now, done),
  failOpen: (queries, now, reason) => failOpenBatch(queries, now, reason),
  degraded: (outcome) => outcome.degraded,
  answer(a, queries, outcome) {
    let wait = -1;
    for (const d of outcome.decisions) if (!d.allowed && d.retryAfterMs > wait) wait = d.retryAfterMs;
    // No RateLimit headers: a batch has several policies (docs/api.md).
    const headers = jsonHeaders(a.ringVersion);
    if (wait < 0) {
      const body = batchAllowedBody(a.ids.ok(), a.receivedAt, queries, outcome.decisions, outcome.degraded !== null, a.processingMs, a.leases);
      return a.set(200, undefined, headers, body);
    }
    const body = batchBlockedBody(a.ids.error(), a.receivedAt, queries, outcome.decisions, wait, a.processingMs);
    return a.set(429, Errors.rateLimited.statusLine, headers + "\r\nRetry-After: " + Math.max(1, Math.ceil(wait / 1000)), body);
  },
  countAnswer(metrics, a, queries, outcome) {
    metrics.countEndpoint("/limit/batch", a.status);
    metrics.countBatchItems(queries.length);
    const decisions = outcome.decisions;
    for (let i = 0; i < decisions.length; i++) {
      const d = decisions[i]!;
      if (d.shadow) metrics.namespaces.countShadow(queries[i]!.namespace);
      else if (!d.allowed && d.degraded === null) metrics.topBlocked.blocked(queries[i]!.namespace, queries[i]!.identifier, a.receivedAt);
    }
  },
  countRefusal: (metrics, status) => metrics.countEndpoint("/limit/batch", status),
};

/*
 * The bodies, built from the single answer's pieces (envelope.ts): the same envelope head
 * and `_request` tail, and each result has the fields of a single answer's `data`.
 */

/** `leases`: an allowed batch's concurrency items each hold a slot and carry its lease (release.ts); a blocked batch held none. */
function resultsJson(queries: readonly LimitQuery[], decisions: readonly Decision[], leases?: LeaseTokens): string {
  let s = "[";
  for (let i = 0; i < queries.length; i++) {
    const d = decisions[i]!;
    const q = queries[i]!;
    s += (i > 0 ? ",{" : "{") + (d.allowed ? allowedFields(q, d, leases && leaseFor(leases, q, d)) : blockedResultFields(q, d)) + "}";
  }
  return s + "]";
}

export function batchAllowedBody(
  id: string,
  timestamp: number,
  queries: readonly LimitQuery[],
  decisions: readonly Decision[],
  degraded: boolean,
  processingMs: number,
  leases?: LeaseTokens,
): string {
  return (
    envelopeHead(id, timestamp, ENVELOPE.rateLimitBatch) +
    '"allowed":true,"results":' +
    resultsJson(queries, decisions, leases) +
    (degraded ? ',"degraded":true' : "") +
    requestTail(true, processingMs)
  );
}

export function batchBlockedBody(
  id: string,
  timestamp: number,
  queries: readonly LimitQuery[],
  decisions: readonly Decision[],
  retryAfterMs: number,
  processingMs: number,
): string {
  return (
    envelopeHead(id, timestamp, ENVELOPE.error) +
    RATE_LIMITED_FIELDS +
    '"allowed":false,"retry_after":' +
    retryAfterMs / 1000 +
    ',"results":' +
    resultsJson(queries, decisions) +
    requestTail(false, processingMs)
  );
}

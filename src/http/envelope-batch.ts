import type { Decision, LimitQuery, RemovedState } from "../decision.js";
import { allowedFields, blockedResultFields, ENVELOPE, envelopeHead, jsonString, RATE_LIMITED_FIELDS, requestTail } from "./envelope.js";

/*
 * Bodies of POST /limit/batch and POST /limit/reset (docs/api.md), built from the single
 * answer's pieces (envelope.ts): the same envelope head and `_request` tail, and each
 * result of a batch has the fields of a single answer's `data`.
 */

function resultsJson(queries: readonly LimitQuery[], decisions: readonly Decision[]): string {
  let s = "[";
  for (let i = 0; i < queries.length; i++) {
    const d = decisions[i]!;
    s += (i > 0 ? ",{" : "{") + (d.allowed ? allowedFields(queries[i]!, d) : blockedResultFields(queries[i]!, d)) + "}";
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
): string {
  return (
    envelopeHead(id, timestamp, ENVELOPE.rateLimitBatch) +
    '"allowed":true,"results":' +
    resultsJson(queries, decisions) +
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

export function resetBody(
  id: string,
  timestamp: number,
  namespace: string,
  identifier: string,
  removed: readonly RemovedState[],
  processingMs: number,
): string {
  return (
    envelopeHead(id, timestamp, ENVELOPE.rateLimitReset) +
    '"namespace":' +
    jsonString(namespace) +
    ',"identifier":' +
    jsonString(identifier) +
    ',"removed":' +
    JSON.stringify(removed) +
    requestTail(true, processingMs)
  );
}

import type { Decision, LimitQuery, RemovedState } from "../decision.js";
import { API_VERSION, formatMs, jsonString, timestampText } from "./envelope.js";

/*
 * Bodies of POST /limit/batch and POST /limit/reset (docs/api.md), concatenated like the
 * single answer's. A batch's results carry the fields of a single answer's `data`, per item.
 */

/** One item of `data.results`: a single answer's fields, `retry_after` when blocked. */
function resultJson(q: LimitQuery, d: Decision): string {
  const common =
    '{"allowed":' +
    d.allowed +
    ',"namespace":' +
    jsonString(q.namespace) +
    ',"identifier":' +
    jsonString(q.identifier) +
    ',"limit":' +
    q.limit +
    ',"remaining":' +
    d.remaining +
    ',"reset_time":' +
    d.resetTime;
  if (!d.allowed) return common + ',"algorithm":"' + q.algorithm.name + '","retry_after":' + d.retryAfterMs / 1000 + "}";
  return common + ',"count":' + (q.limit - d.remaining) + ',"algorithm":"' + q.algorithm.name + '"' + (d.degraded !== null ? ',"degraded":true' : "") + "}";
}

function resultsJson(queries: readonly LimitQuery[], decisions: readonly Decision[]): string {
  let s = "[";
  for (let i = 0; i < queries.length; i++) s += (i > 0 ? "," : "") + resultJson(queries[i]!, decisions[i]!);
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
    '{"id":"' +
    id +
    '","timestamp":' +
    timestampText(timestamp) +
    ',"api_version":"' +
    API_VERSION +
    '","object":"rate_limit_batch","data":{"allowed":true,"results":' +
    resultsJson(queries, decisions) +
    (degraded ? ',"degraded":true' : "") +
    ',"_request":{"success":true,"processing_time_ms":' +
    formatMs(processingMs) +
    "}}}"
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
    '{"id":"' +
    id +
    '","timestamp":' +
    timestampText(timestamp) +
    ',"api_version":"' +
    API_VERSION +
    '","object":"error","data":{"error":"Rate limit exceeded","status":429,"allowed":false,"retry_after":' +
    retryAfterMs / 1000 +
    ',"results":' +
    resultsJson(queries, decisions) +
    ',"_request":{"success":false,"processing_time_ms":' +
    formatMs(processingMs) +
    "}}}"
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
    '{"id":"' +
    id +
    '","timestamp":' +
    timestampText(timestamp) +
    ',"api_version":"' +
    API_VERSION +
    '","object":"rate_limit_reset","data":{"namespace":' +
    jsonString(namespace) +
    ',"identifier":' +
    jsonString(identifier) +
    ',"removed":' +
    JSON.stringify(removed) +
    ',"_request":{"success":true,"processing_time_ms":' +
    formatMs(processingMs) +
    "}}}"
  );
}

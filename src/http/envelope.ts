import type { Decision, LimitQuery } from "../decision.js";
import { Errors, type ErrorDef, type FieldProblem } from "./errors.js";

export const API_VERSION = "v2026.8.23";

/*
 * Response bodies are concatenated from fragments built once, rather than
 * JSON.stringify of a fresh object tree per request: only the values that change are
 * formatted. Strings from the request go through jsonString(), which needs no escaping
 * for the usual identifier and falls back to JSON.stringify otherwise.
 */
/** What follows the timestamp in every envelope, up to the first field of `data`, per `object`. */
function envelopeMiddle(object: string): string {
  return `,"api_version":"${API_VERSION}","object":"${object}","data":{`;
}
export const ENVELOPE = Object.freeze({
  rateLimit: envelopeMiddle("rate_limit"),
  rateLimitBatch: envelopeMiddle("rate_limit_batch"),
  rateLimitReset: envelopeMiddle("rate_limit_reset"),
  rateLimitRelease: envelopeMiddle("rate_limit_release"),
  error: envelopeMiddle("error"),
  cluster: envelopeMiddle("cluster"),
  top: envelopeMiddle("top"),
});
/** `data`'s first fields in a 429, single or batch (the text is errors.ts's). */
export const RATE_LIMITED_FIELDS = `"error":"${Errors.rateLimited.message}","status":${Errors.rateLimited.status},`;

/** `{"id":…,"timestamp":…,"api_version":…,"object":…,"data":{`: the head every answer shares; `middle` is one of ENVELOPE. */
export function envelopeHead(id: string, timestamp: number, middle: string): string {
  return '{"id":"' + id + '","timestamp":' + timestampText(timestamp) + middle;
}

/** The `_request` member that closes `data` and the envelope. */
export function requestTail(success: boolean, processingMs: number): string {
  return (
    (success ? ',"_request":{"success":true,"processing_time_ms":' : ',"_request":{"success":false,"processing_time_ms":') + formatMs(processingMs) + "}}}"
  );
}

const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

export function jsonString(s: string): string {
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : '"' + s + '"';
}

/**
 * A unix-ms timestamp as JSON text. Date.now() is past 2^31, so each String(ms) is a
 * heap-number conversion (~150 ns, microbenchmark); the seconds are formatted once a second
 * and the milliseconds come from a table (pino keeps its time fragments the same way).
 */
const MILLIS = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, "0"));
let cachedSecond = -1;
let cachedSecondText = "";

export function timestampText(ms: number): string {
  if (!(ms >= 1000) || !Number.isInteger(ms)) return String(ms);
  const second = Math.floor(ms / 1000);
  if (second !== cachedSecond) {
    cachedSecond = second;
    cachedSecondText = String(second);
  }
  return cachedSecondText + MILLIS[ms - second * 1000]!;
}

/** Fractional milliseconds, three decimals: enough for a sub-millisecond service. */
export function formatMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/**
 * `"namespace":…,"identifier":…,"limit":…,"remaining":`, which every decided answer and batch
 * result opens with. `limit` is the one applied: an operator's override's, else the query's.
 */
function keyFields(q: LimitQuery, limit: number): string {
  return '"namespace":' + jsonString(q.namespace) + ',"identifier":' + jsonString(q.identifier) + ',"limit":' + limit + ',"remaining":';
}

/** The fields of an allowed decision: the single answer's `data` and a batch result alike; `lease`: a concurrency slot's (base64url, no escaping). */
export function allowedFields(q: LimitQuery, d: Decision, lease?: string): string {
  const a = d.applied;
  const limit = a !== null ? a.limit : q.limit;
  return (
    '"allowed":true,' +
    keyFields(q, limit) +
    d.remaining +
    ',"reset_time":' +
    d.resetTime +
    ',"count":' +
    (limit - d.remaining) +
    ',"algorithm":"' +
    (a !== null ? a.algorithm.name : q.algorithm.name) +
    (d.degraded !== null ? '","degraded":true' : d.shadow ? '","shadow":true' : '"') +
    (lease !== undefined ? ',"lease":"' + lease + '"' : "")
  );
}

/** A blocked batch result: the allowed one's fields without `count`, with `retry_after`. */
export function blockedResultFields(q: LimitQuery, d: Decision): string {
  return (
    '"allowed":false,' +
    keyFields(q, d.applied !== null ? d.applied.limit : q.limit) +
    d.remaining +
    ',"reset_time":' +
    d.resetTime +
    ',"algorithm":"' +
    (d.applied !== null ? d.applied.algorithm.name : q.algorithm.name) +
    '","retry_after":' +
    d.retryAfterMs / 1000
  );
}

export function allowedBody(id: string, timestamp: number, q: LimitQuery, d: Decision, processingMs: number, lease?: string): string {
  return envelopeHead(id, timestamp, ENVELOPE.rateLimit) + allowedFields(q, d, lease) + requestTail(true, processingMs);
}

/** The single 429: the error's fields, then the key's (no `algorithm`, `remaining` 0: docs/api.md). */
export function blockedBody(id: string, timestamp: number, q: LimitQuery, d: Decision, processingMs: number): string {
  return (
    envelopeHead(id, timestamp, ENVELOPE.error) +
    RATE_LIMITED_FIELDS +
    keyFields(q, d.applied !== null ? d.applied.limit : q.limit) +
    '0,"reset_time":' +
    d.resetTime +
    ',"retry_after":' +
    d.retryAfterMs / 1000 +
    requestTail(false, processingMs)
  );
}

export function errorBody(id: string, timestamp: number, error: ErrorDef, details?: readonly FieldProblem[]): string {
  return (
    envelopeHead(id, timestamp, ENVELOPE.error) +
    '"error":"' +
    error.message +
    '","status":' +
    error.status +
    (details !== undefined ? ',"details":' + JSON.stringify(details) : "") +
    "}}"
  );
}

/** IETF draft-ietf-httpapi-ratelimit-headers-10 values. */
export function policyHeader(algorithm: string, limit: number, duration: number): string {
  return '"' + algorithm + '";q=' + limit + ";w=" + duration;
}

/** The header every answer of the POST endpoints (but a 401) and GET /cluster carries (docs/client.md). */
export const RING_VERSION_HEADER = "RingLimit-Ring-Version";

/**
 * The Content-Type value of an answer with the ring-version header joined to it by CRLF
 * (see decisionHeaders): the batch and reset answers. Kept until the ring version changes.
 */
let lastJsonHeaders = { ringVersion: "", value: "" };

export function jsonHeaders(ringVersion: string): string {
  if (lastJsonHeaders.ringVersion !== ringVersion) lastJsonHeaders = { ringVersion, value: "application/json\r\n" + RING_VERSION_HEADER + ": " + ringVersion };
  return lastJsonHeaders.value;
}

/**
 * The Content-Type value of a decided answer with the ring version and the two rate-limit
 * headers joined to it by CRLF, so uWS gets one writeHeader call (see server.ts). Everything
 * up to `r=` depends only on the policy and the ring version, so the last prefix is kept:
 * requests mostly repeat one policy, and the ring version changes only with membership.
 */
let lastPolicy: { algorithm: string; limit: number; duration: number; ringVersion: string; prefix: string } | undefined;

export function decisionHeaders(algorithm: string, limit: number, duration: number, remaining: number, secondsToReset: number, ringVersion: string): string {
  let p = lastPolicy;
  if (p === undefined || p.algorithm !== algorithm || p.limit !== limit || p.duration !== duration || p.ringVersion !== ringVersion) {
    const prefix =
      "application/json\r\n" +
      RING_VERSION_HEADER +
      ": " +
      ringVersion +
      "\r\nRateLimit-Policy: " +
      policyHeader(algorithm, limit, duration) +
      '\r\nRateLimit: "' +
      algorithm +
      '";r=';
    p = lastPolicy = { algorithm, limit, duration, ringVersion, prefix };
  }
  return p.prefix + remaining + ";t=" + secondsToReset;
}

/**
 * The RateLimit headers of one key's decision: the applied limit's (an operator's override's,
 * when the owner applied one), else the request's. The joined values hold only algorithm
 * names and integers, never caller input.
 */
export function queryDecisionHeaders(query: LimitQuery, d: Decision, now: number, ringVersion: string): string {
  const secondsToReset = Math.max(0, d.resetTime - Math.floor(now / 1000));
  const p = d.applied;
  return p === null
    ? decisionHeaders(query.algorithm.name, query.limit, query.duration, d.remaining, secondsToReset, ringVersion)
    : decisionHeaders(p.algorithm.name, p.limit, p.duration, d.remaining, secondsToReset, ringVersion);
}

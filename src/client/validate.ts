import type { LimitData } from "./types.js";

/**
 * The client checks what a node answers as a node checks what a caller sends (docs/client.md,
 * "What the client trusts"): a 200 is a decision only when it is a JSON envelope whose
 * `data.allowed` is true, and a 429 is remembered only when its `retry_after` and
 * `reset_time` are numbers in range. Hand-written: the client carries no validator.
 */

/** The longest body read from a node answering a check: a batch of 100 results is ~30 kB. */
export const MAX_ANSWER_BYTES = 256 * 1024;
/** The longest GET /cluster body read: 256 members with URLs of 2,000 characters fit. */
export const MAX_CLUSTER_BYTES = 1024 * 1024;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0;

/** The body as JSON, or undefined. */
function parse(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
}

/**
 * The `data` of a 200 answer to POST /limit (object "rate_limit") or /limit/batch
 * ("rate_limit_batch"), or undefined when the body is not one: an HTML page, an empty body,
 * `allowed` missing or false.
 */
export function allowedData(body: Buffer, batch: boolean): LimitData | undefined {
  const envelope = parse(body);
  if (!isObject(envelope) || envelope.object !== (batch ? "rate_limit_batch" : "rate_limit")) return undefined;
  const data = envelope.data;
  if (!isObject(data) || data.allowed !== true) return undefined;
  if (data.degraded !== undefined && typeof data.degraded !== "boolean") return undefined;
  if (batch) {
    if (!Array.isArray(data.results) || data.results.length === 0 || !data.results.every((r) => isObject(r) && r.allowed === true)) return undefined;
  } else if (!isCount(data.remaining) || !isCount(data.limit) || !isCount(data.reset_time)) {
    return undefined;
  }
  return data as LimitData;
}

/**
 * The data of a 429, or undefined when it is not a ringlimit answer (a proxy's own 429 is
 * still a refusal, but nothing to remember).
 */
export function blockedData(body: Buffer): (LimitData & { retry_after: number; reset_time: number }) | undefined {
  const envelope = parse(body);
  if (!isObject(envelope) || envelope.object !== "error") return undefined;
  const data = envelope.data;
  if (!isObject(data) || data.allowed === true) return undefined;
  const { retry_after: retryAfter, reset_time: resetTime } = data;
  if (typeof retryAfter !== "number" || !Number.isFinite(retryAfter) || retryAfter < 0 || !isCount(resetTime)) return undefined;
  return data as LimitData & { retry_after: number; reset_time: number };
}

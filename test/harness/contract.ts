/**
 * Shared helpers for the HTTP contract tests (test/http/**): a valid body, unique keys,
 * bounded concurrency, and the envelope checks every response must pass.
 */
import type { Reply } from "./http-client.js";
import { sleep } from "./wait.js";

export const API_VERSION = "v2026.8.23";
export { ALGORITHM_NAMES } from "../../src/algorithms/index.js";

let serial = 0;
/** An identifier no other test (or earlier run against the same node) has used. */
export function uniqueId(prefix = "id"): string {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${(serial++).toString(36)}`;
}

/** A valid POST /limit body with a fresh identifier; `overrides` replace or add fields. */
export function validBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { namespace: "contract", identifier: uniqueId(), limit: 10, duration: 60, ...overrides };
}

/** Run `fn` over `items` with at most `width` in flight; results in input order. */
export async function pool<T, R>(items: readonly T[], width: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(width, items.length) }, async () => {
    for (;;) {
      const i = next++;
      if (i >= items.length) return;
      out[i] = await fn(items[i]!, i);
    }
  });
  await Promise.all(workers);
  return out;
}

/** Minimal assertion surface shared by tap's Test (keeps this file free of tap types). */
export interface Asserts {
  equal(found: unknown, wanted: unknown, message?: string): unknown;
  ok(value: unknown, message?: string): unknown;
  match(found: unknown, pattern: unknown, message?: string): unknown;
  fail(message?: string): unknown;
}

/**
 * Checks the envelope of any /limit answer. Returns a list of problems (empty when fine)
 * so that bulk tests can collect failures instead of emitting thousands of assertions.
 */
export function envelopeProblems(
  r: Reply,
  kind: "rate_limit" | "rate_limit_batch" | "rate_limit_reset" | "error",
  sentAt?: { before: number; after: number },
): string[] {
  const p: string[] = [];
  const ct = String(r.headers["content-type"] ?? "");
  if (!/^application\/json/i.test(ct)) p.push(`content-type ${JSON.stringify(ct)}`);
  const j = r.json;
  if (j === undefined || j === null || typeof j !== "object" || Array.isArray(j)) return [...p, `body is not a JSON object: ${r.text.slice(0, 200)}`];
  const prefix = kind === "error" ? "err_" : "req_";
  if (typeof j.id !== "string" || !j.id.startsWith(prefix) || j.id.length <= prefix.length) p.push(`id ${JSON.stringify(j.id)} lacks ${prefix}`);
  if (typeof j.timestamp !== "number" || !Number.isInteger(j.timestamp)) p.push(`timestamp ${JSON.stringify(j.timestamp)}`);
  else if (sentAt !== undefined && (j.timestamp < sentAt.before - 5 || j.timestamp > sentAt.after + 5))
    p.push(`timestamp ${j.timestamp} outside [${sentAt.before}, ${sentAt.after}]`);
  if (j.api_version !== API_VERSION) p.push(`api_version ${JSON.stringify(j.api_version)}`);
  if (j.object !== kind) p.push(`object ${JSON.stringify(j.object)} != ${kind}`);
  if (typeof j.data !== "object" || j.data === null || Array.isArray(j.data)) p.push("data is not an object");
  else if (kind === "error") {
    if (typeof j.data.error !== "string" || j.data.error === "") p.push(`data.error ${JSON.stringify(j.data.error)}`);
    if (j.data.status !== r.status) p.push(`data.status ${j.data.status} != HTTP ${r.status}`);
  }
  return p;
}

/** Text that would betray internals: stack frames, file paths, module folders. */
export function leakProblems(text: string): string[] {
  const p: string[] = [];
  if (/\bat .*\.(js|ts|mjs|cjs)\b/.test(text)) p.push("stack frame");
  if (/node_modules/.test(text)) p.push("node_modules path");
  if (/\/(work|home|usr|tmp)\//.test(text)) p.push("file path");
  if (/\b(TypeError|RangeError|SyntaxError|ReferenceError)\b/.test(text)) p.push("JS error name");
  return p;
}

/** POST body of exactly `bytes` UTF-8 bytes: a valid request padded with an ignored field. */
export function paddedBody(bytes: number, base: Record<string, unknown> = validBody()): string {
  const empty = JSON.stringify({ ...base, pad: "" });
  const need = bytes - Buffer.byteLength(empty);
  if (need < 0) throw new Error(`base body already ${Buffer.byteLength(empty)} bytes`);
  const text = JSON.stringify({ ...base, pad: "x".repeat(need) });
  if (Buffer.byteLength(text) !== bytes) throw new Error("padding miscalculated");
  return text;
}

/**
 * Fixed windows are aligned to the epoch: "limit N, then request N+1 is 429" only holds while
 * every request falls in one window. Waits, when needed, until the current window of
 * `durationS` seconds has at least `needMs` left, so a test that takes up to needMs (on a
 * loaded machine) cannot straddle a boundary. With durationS 3600 and needMs 30 s it waits
 * at most 30 s, and only in the last 30 s of an hour.
 */
export async function clearOfWindowEnd(durationS: number, needMs: number): Promise<void> {
  const windowMs = durationS * 1000;
  const left = windowMs - (Date.now() % windowMs);
  if (left < needMs) await sleep(left + 10);
}

/**
 * A printable-ASCII rendering of any string for assertion messages: TAP is line-based, and
 * raw control characters, U+2028/U+2029 or lone surrogates in a message corrupt the stream.
 */
export function show(value: unknown): string {
  const s = typeof value === "string" ? JSON.stringify(value) : String(JSON.stringify(value));
  return s.replace(/[^\x20-\x7e]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

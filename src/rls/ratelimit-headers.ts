import { COUNTED, OVER, type Item } from "./descriptor-item.js";
import type { RlsHeader } from "./wire/messages.js";

/**
 * The RateLimit and RateLimit-Policy fields of draft-ietf-httpapi-ratelimit-headers-10 for
 * the descriptors that were counted (RLS_RATELIMIT_HEADERS): one list item per rule, named
 * by the rule's `name` (else its metric key), `q` the limit and `w` the window in seconds;
 * `r` what remains and `t` the seconds until the window resets. Envoy adds
 * response_headers_to_add to the response its client gets.
 */
export function rateLimitHeaders(items: readonly Item[], now: number): RlsHeader[] {
  let policy = "";
  let state = "";
  const seen = new Set<string>();
  for (const item of items) {
    if ((item.kind !== COUNTED && item.kind !== OVER) || item.rule === undefined) continue;
    const rule = item.rule;
    const name = sfString(rule.name ?? item.metricKey ?? "limit");
    if (seen.has(name)) continue;
    seen.add(name);
    const sep = policy === "" ? "" : ", ";
    policy += `${sep}${name};q=${rule.limit};w=${rule.duration}`;
    state += `${sep}${name};r=${item.allowed ? item.remaining : 0};t=${Math.max(0, Math.ceil((item.resetMs - now) / 1000))}`;
  }
  if (policy === "") return [];
  return [
    { key: "RateLimit-Policy", value: policy },
    { key: "RateLimit", value: state },
  ];
}

/** A structured-field string (RFC 8941): quoted, `\` and `"` escaped, outside printable ASCII dropped. */
function sfString(text: string): string {
  return '"' + text.replace(/[^\x20-\x7e]/g, "").replace(/[\\"]/g, "\\$&") + '"';
}

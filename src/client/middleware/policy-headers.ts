import type { Verdict } from "./common.js";

/**
 * RateLimit and RateLimit-Policy are structured-field lists (draft-ietf-httpapi-ratelimit-headers):
 * one item per policy, each named by a string. Two middlewares on one route (requests per minute
 * and tokens per hour) each add their item; the second must not overwrite the first, and the
 * two names must differ or a client cannot tell which `r=` belongs to which `q=`.
 */

const ITEM_NAME = /^"(?:[^"\\]|\\.)*"/;
const NAMES = /(?:^|,)\s*"((?:[^"\\]|\\.)*)"/g;

/** Set a verdict's headers through a framework's get/set: RateLimit fields appended under a distinct name, others replaced. */
export function applyHeaders(verdict: Verdict, policy: string | undefined, get: (name: string) => unknown, set: (name: string, value: string) => void): void {
  const existingPolicy = fieldText(get("RateLimit-Policy"));
  const incomingPolicy = verdict.headers.find(([n]) => n === "RateLimit-Policy")?.[1];
  const name = incomingPolicy === undefined ? undefined : distinctName(policy ?? unquote(incomingPolicy.match(ITEM_NAME)?.[0]), existingPolicy);
  for (const [header, value] of verdict.headers) {
    if ((header !== "RateLimit" && header !== "RateLimit-Policy") || name === undefined) {
      set(header, value);
      continue;
    }
    const renamed = ITEM_NAME.test(value) ? value.replace(ITEM_NAME, sfString(name)) : value;
    const existing = fieldText(get(header));
    set(header, existing === undefined || existing === "" ? renamed : `${existing}, ${renamed}`);
  }
}

/** `wanted`, or wanted-2, wanted-3... when an item of the field already has that name. */
function distinctName(wanted: string, field: string | undefined): string {
  if (field === undefined) return wanted;
  const taken = new Set([...field.matchAll(NAMES)].map((m) => unquote(`"${m[1]}"`)));
  let name = wanted;
  for (let i = 2; taken.has(name); i++) name = `${wanted}-${i}`;
  return name;
}

function fieldText(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (Array.isArray(value)) return value.join(", ");
  return undefined;
}

function unquote(item: string | undefined): string {
  return item === undefined ? "limit" : item.slice(1, -1).replace(/\\(.)/g, "$1");
}

/** A structured-field string (RFC 8941): quoted, `\` and `"` escaped, outside printable ASCII dropped. */
function sfString(text: string): string {
  return '"' + text.replace(/[^\x20-\x7e]/g, "").replace(/[\\"]/g, "\\$&") + '"';
}

/**
 * What envoyproxy/ratelimit answers, as a table: a policy in its file format, shaped like the
 * configurations its own tests load (basic, wildcard, shadow_mode, share_threshold, replaces,
 * hits_addend, unlimited, nested levels), and the calls made against it in order with the
 * answer each one must get. One table, two doors: the gRPC port (envoy-compat.process.test.ts)
 * and POST /json (test/http/endpoints/json.process.test.ts) must answer it the same way.
 *
 * Every counted rule has an hourly or daily window: a run that starts clear of the hour's end
 * (clearOfWindowEnd) never sees a window close under it.
 */

/** The policy folder: file name → text. */
export const COMPAT_POLICY: Record<string, string> = {
  "ai.yaml": `# Token budgets (docs/envoy.md): every hit counted, past the limit too; count_blocked: false refuses uncounted.
domain: ai
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 1000 }
  - key: strict
    count_blocked: false
    rate_limit: { unit: hour, requests_per_unit: 10 }
`,
  "basic.yaml": `# Nested levels, a value tried before the key alone, unlimited and a deny rule.
domain: basic
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: { unit: hour, requests_per_unit: 2 }
      - key: subkey1
        value: subvalue1
        rate_limit: { unit: hour, requests_per_unit: 4 }
  - key: key2
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: key2
    value: value2
    rate_limit: { unit: DAY, requests_per_unit: 3 }
  - key: key5
    value: value5
    descriptors:
      - key: subkey5
        descriptors:
          - key: subsubkey5
            rate_limit: { unit: Hour, requests_per_unit: 1 }
  - key: open
    rate_limit: { unlimited: true }
  - key: blocked
    rate_limit: { unit: hour, requests_per_unit: 0 }
`,
  "wildcard.yaml": `domain: wildcard
descriptors:
  - key: path
    value: /api/health
    rate_limit: { unlimited: true }
  - key: path
    value: /api/*
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: path
    value: /users/*/posts
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: path
    value: "*.example.*"
    rate_limit: { unit: hour, requests_per_unit: 3 }
  - key: path
    rate_limit: { unit: hour, requests_per_unit: 5 }
`,
  "share.yaml": `domain: share
descriptors:
  - key: tenant
    value: acme-*
    share_threshold: true
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: tenant
    value: solo-*
    rate_limit: { unit: hour, requests_per_unit: 1 }
`,
  "shadow.yaml": `domain: shadow
descriptors:
  - key: user
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: strict
    rate_limit: { unit: hour, requests_per_unit: 1 }
`,
  "replaces.yaml": `domain: replaces
descriptors:
  - key: service
    value: checkout
    rate_limit: { name: checkout-all, unit: hour, requests_per_unit: 1 }
  - key: user
    value: vip
    rate_limit:
      unit: hour
      requests_per_unit: 100
      replaces:
        - name: checkout-all
`,
  "hits.yaml": `domain: hits
descriptors:
  - key: bytes
    rate_limit: { unit: hour, requests_per_unit: 10 }
`,
};

type Pair = [key: string, value: string];

/** A descriptor of a call: its entries, and optionally its own limit and hits_addend. */
export interface CaseDescriptor {
  entries: Pair[];
  limit?: { requestsPerUnit: number; unit: string };
  hitsAddend?: number;
  /** Envoy 1.38's is_negative_hits: a refund */
  negative?: boolean;
}

export interface CaseCall {
  domain: string;
  descriptors: CaseDescriptor[];
  hitsAddend?: number;
}

/** What one status must say: code, current_limit (unset when undefined) and limit_remaining. */
export interface ExpectedStatus {
  code: "OK" | "OVER_LIMIT";
  limit?: { requestsPerUnit?: number; unit: string; name?: string };
  remaining: number;
}

export interface CompatCase {
  what: string;
  call: CaseCall;
  overall: "OK" | "OVER_LIMIT";
  statuses: ExpectedStatus[];
}

const UNLIMITED_REMAINING = 4_294_967_295;

const one = (domain: string, ...entries: Pair[]): CaseCall => ({ domain, descriptors: [{ entries }] });
const ok = (remaining: number, requestsPerUnit: number, unit = "HOUR", name?: string): ExpectedStatus => ({
  code: "OK",
  limit: { requestsPerUnit, unit, ...(name === undefined ? {} : { name }) },
  remaining,
});
const over = (requestsPerUnit: number | undefined, unit = "HOUR", name?: string): ExpectedStatus => ({
  code: "OVER_LIMIT",
  limit: { ...(requestsPerUnit === undefined ? {} : { requestsPerUnit }), unit, ...(name === undefined ? {} : { name }) },
  remaining: 0,
});
/** A shadow_mode rule over its limit: OK, its rule, nothing left. */
const shadowed = (requestsPerUnit: number): ExpectedStatus => ({ code: "OK", limit: { requestsPerUnit, unit: "HOUR" }, remaining: 0 });
const NONE: ExpectedStatus = { code: "OK", remaining: 0 };
const UNLIMITED: ExpectedStatus = { code: "OK", remaining: UNLIMITED_REMAINING };

/** Envoy's two calls for one LLM request: at request headers hits_addend 0, at the stream's end the tokens used. */
const tokens = (user: string, hits: number): CaseCall => ({ domain: "ai", descriptors: [{ entries: [["user", user]], hitsAddend: hits }] });

/** The calls, in order: later ones see what earlier ones counted. */
export const COMPAT_CASES: readonly CompatCase[] = [
  // Token budgets: Envoy Gateway's cost.request (0: a check) then cost.response (the tokens: a charge)
  { what: "two-call: a check (hits 0) counts nothing", call: tokens("alice", 0), overall: "OK", statuses: [ok(1000, 1000)] },
  { what: "two-call: a charge past the budget is counted (debt)", call: tokens("alice", 50_000), overall: "OVER_LIMIT", statuses: [over(1000)] },
  { what: "two-call: the next check is over", call: tokens("alice", 0), overall: "OVER_LIMIT", statuses: [over(1000)] },
  { what: "two-call: a charge within the budget", call: tokens("bob", 999), overall: "OK", statuses: [ok(1, 1000)] },
  { what: "two-call: a charge up to exactly the budget", call: tokens("bob", 1), overall: "OK", statuses: [ok(0, 1000)] },
  { what: "two-call: a check at exactly the budget is OK (over only past it)", call: tokens("bob", 0), overall: "OK", statuses: [ok(0, 1000)] },
  { what: "two-call: one more token is past it", call: tokens("bob", 1), overall: "OVER_LIMIT", statuses: [over(1000)] },
  { what: "two-call: and the check after it is over", call: tokens("bob", 0), overall: "OVER_LIMIT", statuses: [over(1000)] },
  // is_negative_hits (Envoy 1.38): the hits are given back, the count floors at zero
  {
    what: "refund: is_negative_hits gives back a debt",
    call: { domain: "ai", descriptors: [{ entries: [["user", "bob"]], hitsAddend: 201, negative: true }] },
    overall: "OK",
    statuses: [ok(200, 1000)],
  },
  { what: "refund: the check after it passes", call: tokens("bob", 0), overall: "OK", statuses: [ok(200, 1000)] },
  {
    what: "refund: never below zero",
    call: { domain: "ai", descriptors: [{ entries: [["user", "bob"]], hitsAddend: 5000, negative: true }] },
    overall: "OK",
    statuses: [ok(1000, 1000)],
  },
  {
    what: "count_blocked false: hits that do not fit are refused",
    call: { domain: "ai", descriptors: [{ entries: [["strict", "s"]], hitsAddend: 11 }] },
    overall: "OVER_LIMIT",
    statuses: [over(10)],
  },
  {
    what: "count_blocked false: and not counted",
    call: { domain: "ai", descriptors: [{ entries: [["strict", "s"]], hitsAddend: 10 }] },
    overall: "OK",
    statuses: [ok(0, 10)],
  },
  // basic: a key with its value is tried before the key alone; each value of the key alone counts apart
  { what: "basic: nested rule, first hit", call: one("basic", ["key1", "value1"], ["subkey1", "x"]), overall: "OK", statuses: [ok(1, 2)] },
  { what: "basic: nested rule, second hit", call: one("basic", ["key1", "value1"], ["subkey1", "x"]), overall: "OK", statuses: [ok(0, 2)] },
  { what: "basic: nested rule, over", call: one("basic", ["key1", "value1"], ["subkey1", "x"]), overall: "OVER_LIMIT", statuses: [over(2)] },
  { what: "basic: another value of the key alone counts apart", call: one("basic", ["key1", "value1"], ["subkey1", "y"]), overall: "OK", statuses: [ok(1, 2)] },
  {
    what: "basic: the key with its value beats the key alone",
    call: one("basic", ["key1", "value1"], ["subkey1", "subvalue1"]),
    overall: "OK",
    statuses: [ok(3, 4)],
  },
  { what: "basic: key2 alone", call: one("basic", ["key2", "anything"]), overall: "OK", statuses: [ok(0, 1)] },
  { what: "basic: key2 alone, over", call: one("basic", ["key2", "anything"]), overall: "OVER_LIMIT", statuses: [over(1)] },
  { what: "basic: key2 with value2 (unit DAY, any case in the file)", call: one("basic", ["key2", "value2"]), overall: "OK", statuses: [ok(2, 3, "DAY")] },
  { what: "basic: requests_per_unit 0 blocks", call: one("basic", ["blocked", "b"]), overall: "OVER_LIMIT", statuses: [over(undefined)] },
  // nesting: a rule applies only at the depth of the request's entries
  { what: "depth: a level without rate_limit only nests", call: one("basic", ["key1", "value1"]), overall: "OK", statuses: [NONE] },
  {
    what: "depth: more entries than the tree is deep",
    call: one("basic", ["key1", "value1"], ["subkey1", "x"], ["extra", "e"]),
    overall: "OK",
    statuses: [NONE],
  },
  { what: "depth: three levels", call: one("basic", ["key5", "value5"], ["subkey5", "a"], ["subsubkey5", "b"]), overall: "OK", statuses: [ok(0, 1)] },
  {
    what: "depth: three levels, over",
    call: one("basic", ["key5", "value5"], ["subkey5", "a"], ["subsubkey5", "b"]),
    overall: "OVER_LIMIT",
    statuses: [over(1)],
  },
  { what: "depth: two of three levels", call: one("basic", ["key5", "value5"], ["subkey5", "a"]), overall: "OK", statuses: [NONE] },
  // what matches nothing
  { what: "no rule for the key", call: one("basic", ["nothing", "here"]), overall: "OK", statuses: [NONE] },
  { what: "no rule for the value (key1 has value1 only)", call: one("basic", ["key1", "other"], ["subkey1", "x"]), overall: "OK", statuses: [NONE] },
  { what: "an unknown domain", call: one("no-such-domain", ["key2", "value2"]), overall: "OK", statuses: [NONE] },
  // unlimited: never counted, never over
  { what: "unlimited", call: one("basic", ["open", "1"]), overall: "OK", statuses: [UNLIMITED] },
  { what: "unlimited, again", call: { domain: "basic", hitsAddend: 1000, descriptors: [{ entries: [["open", "1"]] }] }, overall: "OK", statuses: [UNLIMITED] },
  // wildcards: the exact value first, then wildcards (trailing, middle, several), then the key alone
  { what: "wildcard: an exact value beats the wildcard", call: one("wildcard", ["path", "/api/health"]), overall: "OK", statuses: [UNLIMITED] },
  { what: "wildcard: trailing", call: one("wildcard", ["path", "/api/a"]), overall: "OK", statuses: [ok(0, 1)] },
  { what: "wildcard: trailing, over", call: one("wildcard", ["path", "/api/a"]), overall: "OVER_LIMIT", statuses: [over(1)] },
  { what: "wildcard: trailing, each value counts apart", call: one("wildcard", ["path", "/api/b"]), overall: "OK", statuses: [ok(0, 1)] },
  { what: "wildcard: in the middle", call: one("wildcard", ["path", "/users/42/posts"]), overall: "OK", statuses: [ok(1, 2)] },
  { what: "wildcard: several", call: one("wildcard", ["path", "www.example.org"]), overall: "OK", statuses: [ok(2, 3)] },
  { what: "wildcard: none matches, the key alone", call: one("wildcard", ["path", "/users/42"]), overall: "OK", statuses: [ok(4, 5)] },
  // share_threshold: every value under the wildcard shares one counter
  { what: "share_threshold: first value", call: one("share", ["tenant", "acme-1"]), overall: "OK", statuses: [ok(1, 2)] },
  { what: "share_threshold: another value, the same counter", call: one("share", ["tenant", "acme-2"]), overall: "OK", statuses: [ok(0, 2)] },
  { what: "share_threshold: a third value is over", call: one("share", ["tenant", "acme-3"]), overall: "OVER_LIMIT", statuses: [over(2)] },
  { what: "without share_threshold: first value", call: one("share", ["tenant", "solo-1"]), overall: "OK", statuses: [ok(0, 1)] },
  { what: "without share_threshold: another value counts apart", call: one("share", ["tenant", "solo-2"]), overall: "OK", statuses: [ok(0, 1)] },
  // shadow_mode: counted, and OK when over
  { what: "shadow_mode: within", call: one("shadow", ["user", "u1"]), overall: "OK", statuses: [ok(0, 1)] },
  { what: "shadow_mode: over answers OK", call: one("shadow", ["user", "u1"]), overall: "OK", statuses: [shadowed(1)] },
  {
    what: "shadow_mode: overall OVER_LIMIT only from a rule not in shadow mode",
    call: { domain: "shadow", descriptors: [{ entries: [["user", "u1"]] }, { entries: [["strict", "s1"]] }, { entries: [["strict", "s1"]] }] },
    overall: "OVER_LIMIT",
    statuses: [shadowed(1), ok(0, 1), over(1)],
  },
  // replaces: the named rule is dropped when both match one request
  {
    what: "replaces: the named rule alone applies",
    call: one("replaces", ["service", "checkout"]),
    overall: "OK",
    statuses: [ok(0, 1, "HOUR", "checkout-all")],
  },
  { what: "replaces: alone, over", call: one("replaces", ["service", "checkout"]), overall: "OVER_LIMIT", statuses: [over(1, "HOUR", "checkout-all")] },
  {
    what: "replaces: together, the replaced rule is dropped",
    call: { domain: "replaces", descriptors: [{ entries: [["service", "checkout"]] }, { entries: [["user", "vip"]] }] },
    overall: "OK",
    statuses: [NONE, ok(99, 100)],
  },
  // hits_addend: the request's weighs every descriptor; a descriptor's own replaces it
  {
    what: "hits_addend of the request",
    call: { domain: "hits", hitsAddend: 4, descriptors: [{ entries: [["bytes", "a"]] }] },
    overall: "OK",
    statuses: [ok(6, 10)],
  },
  {
    what: "hits_addend of the request, again",
    call: { domain: "hits", hitsAddend: 4, descriptors: [{ entries: [["bytes", "a"]] }] },
    overall: "OK",
    statuses: [ok(2, 10)],
  },
  {
    what: "hits_addend past the limit is over",
    call: { domain: "hits", hitsAddend: 3, descriptors: [{ entries: [["bytes", "a"]] }] },
    overall: "OVER_LIMIT",
    statuses: [over(10)],
  },
  {
    what: "hits_addend per descriptor replaces the request's",
    call: { domain: "hits", hitsAddend: 2, descriptors: [{ entries: [["bytes", "b"]], hitsAddend: 7 }, { entries: [["bytes", "c"]] }] },
    overall: "OK",
    statuses: [ok(3, 10), ok(8, 10)],
  },
  // a descriptor's own limit is used as given, and shadow_mode does not apply to it
  {
    what: "override: the descriptor's limit",
    call: { domain: "basic", descriptors: [{ entries: [["key2", "ovr"]], limit: { requestsPerUnit: 2, unit: "DAY" } }] },
    overall: "OK",
    statuses: [ok(1, 2, "DAY")],
  },
  {
    what: "override: a named rule's name is not the override's",
    call: { domain: "replaces", descriptors: [{ entries: [["service", "checkout"]], limit: { requestsPerUnit: 5, unit: "DAY" } }] },
    overall: "OK",
    statuses: [ok(4, 5, "DAY")],
  },
  {
    what: "override: on a shadow_mode rule, first hit",
    call: { domain: "shadow", descriptors: [{ entries: [["user", "u9"]], limit: { requestsPerUnit: 1, unit: "HOUR" } }] },
    overall: "OK",
    statuses: [ok(0, 1)],
  },
  {
    what: "override: on a shadow_mode rule, over is OVER_LIMIT",
    call: { domain: "shadow", descriptors: [{ entries: [["user", "u9"]], limit: { requestsPerUnit: 1, unit: "HOUR" } }] },
    overall: "OVER_LIMIT",
    statuses: [over(1)],
  },
];

/** A status as either door answers it, reduced to what the table states (snake_case or camelCase names). */
export function observedStatus(status: Record<string, unknown>): ExpectedStatus {
  const limit = (status.current_limit ?? status.currentLimit) as Record<string, unknown> | undefined | null;
  const out: ExpectedStatus = { code: status.code as ExpectedStatus["code"], remaining: Number(status.limit_remaining ?? status.limitRemaining ?? 0) };
  if (limit !== undefined && limit !== null) {
    const rpu = limit.requests_per_unit ?? limit.requestsPerUnit;
    out.limit = { unit: String(limit.unit ?? "UNKNOWN") };
    if (rpu !== undefined && rpu !== 0) out.limit.requestsPerUnit = Number(rpu);
    if (limit.name !== undefined && limit.name !== "") out.limit.name = String(limit.name);
  }
  return out;
}

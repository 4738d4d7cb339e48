import typia, { tags } from "typia";
import { ALGORITHM_NAMES, algorithmByName, DEFAULT_ALGORITHM, type AlgorithmName } from "../algorithms/index.js";
import { CHARGE_ID_PATTERN, REQUEST_BOUNDS, SlugCache, type LimitQuery, type ResetQuery } from "../decision.js";
import type { FieldProblem } from "./errors.js";

type B = typeof REQUEST_BOUNDS;
type Text<K extends keyof B> = string & tags.MinLength<B[K]["min"]> & tags.MaxLength<B[K]["max"]>;
type Integer<K extends keyof B> = number & tags.Type<"uint32"> & tags.Minimum<B[K]["min"]> & tags.Maximum<B[K]["max"]>;

/** The body of POST /limit, bounded by REQUEST_BOUNDS. Unknown fields are ignored. */
export interface LimitRequestBody {
  namespace: Text<"namespace">;
  product?: Text<"product">;
  identifier: Text<"identifier">;
  limit: Integer<"limit">;
  duration: Integer<"duration">;
  algorithm?: AlgorithmName;
  /** what the request weighs (docs/api.md): 0 is a peek; never above `limit` */
  cost?: Integer<"cost">;
}

/**
 * The body of POST /limit/charge: POST /limit's, with a uint32 limit (token budgets) and a
 * required cost, a non-zero integer within ±1e9 (negative: a refund).
 */
export interface ChargeRequestBody extends Omit<LimitRequestBody, "limit" | "cost"> {
  limit: Integer<"chargeLimit">;
  cost: number & tags.Type<"int32"> & tags.Minimum<B["chargeCost"]["min"]> & tags.Maximum<B["chargeCost"]["max"]>;
  /** names the charge: counted at most once by the key's owner (docs/api.md, Charge ids) */
  charge_id?: string & tags.Pattern<typeof CHARGE_ID_PATTERN>;
}

/** The body of POST /limit/reset: the states of one identifier, all of them or the one named. */
export interface ResetRequestBody {
  namespace: Text<"namespace">;
  product?: Text<"product">;
  identifier: Text<"identifier">;
  algorithm?: AlgorithmName;
  duration?: Integer<"duration">;
}

/** POST /limit/batch takes 1 to this many requests. */
export const MAX_BATCH_ITEMS = 100;
export const DEFAULT_COST = 1;

// The valid case is checked with is() and only a refused body goes through validate() to
// explain why: validate() builds an errors array and result object for every call.
const isBody = typia.createIs<LimitRequestBody>();
const validateBody = typia.createValidate<LimitRequestBody>();
const isChargeBody = typia.createIs<ChargeRequestBody>();
const validateChargeBody = typia.createValidate<ChargeRequestBody>();
const isResetBody = typia.createIs<ResetRequestBody>();
const validateResetBody = typia.createValidate<ResetRequestBody>();

const text = (k: "namespace" | "product" | "identifier") => `must be a string of ${REQUEST_BOUNDS[k].min} to ${REQUEST_BOUNDS[k].max} characters`;
const integer = (k: "limit" | "duration" | "cost" | "chargeLimit" | "chargeCost") =>
  `must be an integer from ${REQUEST_BOUNDS[k].min} to ${REQUEST_BOUNDS[k].max}`;

/** What a 400 says about each field: the rule, never the value sent. */
export const FIELD_RULES: Readonly<Record<string, string>> = Object.freeze({
  namespace: text("namespace"),
  product: text("product"),
  identifier: text("identifier"),
  limit: integer("limit"),
  duration: integer("duration") + " (seconds)",
  algorithm: `must be one of ${ALGORITHM_NAMES.join(", ")}`,
  cost: integer("cost"),
});

/** POST /limit/charge's rules where they differ from POST /limit's. */
const CHARGE_RULES: Readonly<Record<string, string>> = Object.freeze({
  ...FIELD_RULES,
  limit: integer("chargeLimit"),
  cost: integer("chargeCost") + ", not 0",
  charge_id: `must be a string of ${REQUEST_BOUNDS.chargeId.min} to ${REQUEST_BOUNDS.chargeId.max} visible ASCII characters (! to ~, no space)`,
});

export type ParseResult = { ok: true; query: LimitQuery } | { ok: false; problems: FieldProblem[] };
export type BatchParseResult = { ok: true; queries: LimitQuery[] } | { ok: false; problems: FieldProblem[] };
export type ResetParseResult = { ok: true; query: ResetQuery } | { ok: false; problems: FieldProblem[] };

const slugs = new SlugCache();
const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();
const NOT_WELL_FORMED = "must be well-formed Unicode (no lone surrogate code points)";

/** Validate a parsed JSON body. Messages name the field and the rule, never the value. */
export function toLimitQuery(body: unknown, prefix = ""): ParseResult {
  if (!isBody(body)) {
    const result = validateBody(body);
    return { ok: false, problems: result.success ? [{ field: prefix || "body", message: "is invalid" }] : describe(result.errors, body, prefix) };
  }
  const valid = body;
  // Refused rather than carried: the peer channel and hand-off encode keys as UTF-8, where a
  // lone surrogate becomes U+FFFD, so "\ud800" and "\udbff" would share a counter when
  // forwarded and have another one locally. For a string V8 holds in one byte per character
  // (every ASCII or Latin-1 key) isWellFormed() answers from the representation without a
  // scan: 6-20 ns per call; a two-byte string is scanned (512 CJK characters: ~360 ns).
  const malformed = malformedUnicode(valid, prefix);
  if (malformed !== undefined) return { ok: false, problems: malformed };
  const namespace = effectiveNamespace(valid.namespace, valid.product);
  if (namespace === undefined) return { ok: false, problems: [{ field: prefix + "product", message: "must contain at least one letter or digit" }] };
  const cost = valid.cost ?? DEFAULT_COST;
  if (cost > valid.limit) return { ok: false, problems: [{ field: prefix + "cost", message: "must not be above limit" }] };
  return {
    ok: true,
    query: {
      namespace,
      identifier: valid.identifier,
      limit: valid.limit,
      duration: valid.duration,
      algorithm: algorithmByName(valid.algorithm ?? DEFAULT_ALGORITHM)!,
      cost,
      overridable: true,
    },
  };
}

/** POST /limit/charge's body: a LimitQuery counted whatever remains (LimitQuery.charge). Cost 0 is refused. */
export function toChargeQuery(body: unknown): ParseResult {
  if (!isChargeBody(body) || body.cost === 0) {
    if (isChargeBody(body)) return { ok: false, problems: [{ field: "cost", message: CHARGE_RULES.cost! }] };
    const result = validateChargeBody(body);
    return { ok: false, problems: result.success ? [{ field: "body", message: "is invalid" }] : describe(result.errors, body, "", CHARGE_RULES) };
  }
  const malformed = malformedUnicode(body, "");
  if (malformed !== undefined) return { ok: false, problems: malformed };
  const namespace = effectiveNamespace(body.namespace, body.product);
  if (namespace === undefined) return { ok: false, problems: [{ field: "product", message: "must contain at least one letter or digit" }] };
  const algorithm = algorithmByName(body.algorithm ?? DEFAULT_ALGORITHM)!;
  return {
    ok: true,
    query: {
      namespace,
      identifier: body.identifier,
      limit: body.limit,
      duration: body.duration,
      algorithm,
      cost: body.cost,
      overridable: true,
      charge: true,
      ...(body.charge_id !== undefined ? { chargeId: body.charge_id } : {}),
    },
  };
}

/** `{"requests": [ <limit request>, … ]}` with 1..100 items; problems name `requests[i].field`. */
export function toBatchQueries(body: unknown): BatchParseResult {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return { ok: false, problems: [{ field: "body", message: "must be a JSON object" }] };
  const requests = (body as { requests?: unknown }).requests;
  if (requests === undefined) return { ok: false, problems: [{ field: "requests", message: "is required" }] };
  if (!Array.isArray(requests) || requests.length < 1 || requests.length > MAX_BATCH_ITEMS) {
    return { ok: false, problems: [{ field: "requests", message: `must be an array of 1 to ${MAX_BATCH_ITEMS} limit requests` }] };
  }
  const queries: LimitQuery[] = [];
  const problems: FieldProblem[] = [];
  for (let i = 0; i < requests.length; i++) {
    const r = toLimitQuery(requests[i], `requests[${i}].`);
    if (r.ok) queries.push(r.query);
    else problems.push(...r.problems);
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, queries };
}

export function toResetQuery(body: unknown): ResetParseResult {
  if (!isResetBody(body)) {
    const result = validateResetBody(body);
    return { ok: false, problems: result.success ? [{ field: "body", message: "is invalid" }] : describe(result.errors, body, "") };
  }
  const malformed = malformedUnicode(body, "");
  if (malformed !== undefined) return { ok: false, problems: malformed };
  const namespace = effectiveNamespace(body.namespace, body.product);
  if (namespace === undefined) return { ok: false, problems: [{ field: "product", message: "must contain at least one letter or digit" }] };
  return {
    ok: true,
    query: {
      namespace,
      identifier: body.identifier,
      algorithm: body.algorithm === undefined ? undefined : algorithmByName(body.algorithm)!,
      duration: body.duration,
    },
  };
}

/** `namespace.slug` when a product was sent; undefined when the product's slug is empty. */
function effectiveNamespace(namespace: string, product: string | undefined): string | undefined {
  if (product === undefined) return namespace;
  const slug = slugs.get(product);
  return slug === "" ? undefined : namespace + "." + slug;
}

/** Problems for namespace, product and identifier that are not well-formed Unicode; undefined when none. */
function malformedUnicode(body: { namespace: string; product?: string | undefined; identifier: string }, prefix: string): FieldProblem[] | undefined {
  if (isWellFormed(body.namespace) && isWellFormed(body.identifier) && (body.product === undefined || isWellFormed(body.product))) return undefined;
  const problems: FieldProblem[] = [];
  for (const field of ["namespace", "product", "identifier"] as const) {
    const value = body[field];
    if (value !== undefined && !isWellFormed(value)) problems.push({ field: prefix + field, message: NOT_WELL_FORMED });
  }
  return problems;
}

function describe(errors: typia.IValidation.IError[], body: unknown, prefix: string, rules = FIELD_RULES): FieldProblem[] {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return [{ field: prefix === "" ? "body" : prefix.slice(0, -1), message: "must be a JSON object" }];
  }
  const problems: FieldProblem[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    const match = /^\$input\.([A-Za-z_$][\w$]*)/.exec(error.path);
    const field = match?.[1] ?? "body";
    if (seen.has(field)) continue;
    seen.add(field);
    const missing = (body as Record<string, unknown>)[field] === undefined;
    problems.push({ field: prefix + field, message: missing ? "is required" : (rules[field] ?? "is invalid") });
  }
  return problems;
}

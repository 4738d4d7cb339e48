import typia, { tags } from "typia";
import { ALGORITHM_NAMES, algorithmByName, DEFAULT_ALGORITHM, type AlgorithmName } from "../algorithms/index.js";
import { REQUEST_BOUNDS, type LimitQuery } from "../decision.js";
import type { FieldProblem } from "./errors.js";
import { SlugCache } from "../slug.js";

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
}

// The valid case is checked with is() and only a refused body goes through validate() to
// explain why: validate() builds an errors array and result object for every call.
const isBody = typia.createIs<LimitRequestBody>();
const validateBody = typia.createValidate<LimitRequestBody>();

const text = (k: "namespace" | "product" | "identifier") => `must be a string of ${REQUEST_BOUNDS[k].min} to ${REQUEST_BOUNDS[k].max} characters`;
const integer = (k: "limit" | "duration") => `must be an integer from ${REQUEST_BOUNDS[k].min} to ${REQUEST_BOUNDS[k].max}`;

/** What a 400 says about each field: the rule, never the value sent. */
export const FIELD_RULES: Readonly<Record<string, string>> = Object.freeze({
  namespace: text("namespace"),
  product: text("product"),
  identifier: text("identifier"),
  limit: integer("limit"),
  duration: integer("duration") + " (seconds)",
  algorithm: `must be one of ${ALGORITHM_NAMES.join(", ")}`,
});

export type ParseResult = { ok: true; query: LimitQuery } | { ok: false; problems: FieldProblem[] };

const slugs = new SlugCache();

/** Validate a parsed JSON body. Messages name the field and the rule, never the value. */
export function toLimitQuery(body: unknown): ParseResult {
  if (!isBody(body)) {
    const result = validateBody(body);
    return { ok: false, problems: result.success ? [{ field: "body", message: "is invalid" }] : describe(result.errors, body) };
  }
  const valid = body;
  let namespace = valid.namespace;
  if (valid.product !== undefined) {
    const slug = slugs.get(valid.product);
    if (slug === "") return { ok: false, problems: [{ field: "product", message: "must contain at least one letter or digit" }] };
    namespace = namespace + "." + slug;
  }
  return {
    ok: true,
    query: {
      namespace,
      identifier: valid.identifier,
      limit: valid.limit,
      duration: valid.duration,
      algorithm: algorithmByName(valid.algorithm ?? DEFAULT_ALGORITHM)!,
    },
  };
}

function describe(errors: typia.IValidation.IError[], body: unknown): FieldProblem[] {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return [{ field: "body", message: "must be a JSON object" }];
  }
  const problems: FieldProblem[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    const match = /^\$input\.([A-Za-z_$][\w$]*)/.exec(error.path);
    const field = match?.[1] ?? "body";
    if (seen.has(field)) continue;
    seen.add(field);
    const missing = (body as Record<string, unknown>)[field] === undefined;
    problems.push({ field, message: missing ? "is required" : (FIELD_RULES[field] ?? "is invalid") });
  }
  return problems;
}

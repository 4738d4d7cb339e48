import typia, { tags } from "typia";
import { algorithmByName, DEFAULT_ALGORITHM } from "../algorithms/index.js";
import type { LimitQuery } from "../decision.js";
import type { FieldProblem } from "./errors.js";
import { SlugCache } from "./slug.js";

/** The body of POST /limit, with every bound of the spec's Limits table. Unknown fields are ignored. */
export interface LimitRequestBody {
  namespace: string & tags.MinLength<1> & tags.MaxLength<256>;
  product?: string & tags.MinLength<1> & tags.MaxLength<128>;
  identifier: string & tags.MinLength<1> & tags.MaxLength<512>;
  limit: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<1000000>;
  duration: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<31536000>;
  algorithm?: "fixed-window" | "sliding-window" | "token-bucket" | "leaky-bucket";
}

// The valid case is checked with is() and only a refused body goes through validate() to
// explain why: validate() builds an errors array and result object for every call.
const isBody = typia.createIs<LimitRequestBody>();
const validateBody = typia.createValidate<LimitRequestBody>();

const FIELD_RULES: Record<string, string> = {
  namespace: "must be a string of 1 to 256 characters",
  product: "must be a string of 1 to 128 characters",
  identifier: "must be a string of 1 to 512 characters",
  limit: "must be an integer from 1 to 1000000",
  duration: "must be an integer from 1 to 31536000 (seconds)",
  algorithm: "must be one of fixed-window, sliding-window, token-bucket, leaky-bucket",
};

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

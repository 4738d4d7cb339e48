import { RLS_BOUNDS } from "./wire/fields.js";
import { overrideUnitNumber, type RlsRequest } from "./wire/messages.js";

/**
 * The first problem of a request as `field: problem` (the INVALID_ARGUMENT message), or
 * undefined when it can be decided. Nothing is counted for a refused request. The counts and
 * sizes were bounded by the decoder that read it (wire/fields.ts); this is what is left.
 */
export function requestProblem(request: RlsRequest): string | undefined {
  const domain = request.domain;
  if (typeof domain !== "string" || domain.length < RLS_BOUNDS.domain.min) return "domain: must not be empty";
  if (domain.length > RLS_BOUNDS.domain.max) return `domain: must be at most ${RLS_BOUNDS.domain.max} characters`;
  const hits = request.hits_addend;
  if (hits !== undefined && (!Number.isInteger(hits) || hits < 0)) return "hits_addend: must be a non-negative integer";
  const descriptors = request.descriptors;
  if (!Array.isArray(descriptors) || descriptors.length < RLS_BOUNDS.descriptors.min) return "descriptors: must not be empty";
  if (descriptors.length > RLS_BOUNDS.descriptors.max) return `descriptors: at most ${RLS_BOUNDS.descriptors.max} per request`;
  for (let i = 0; i < descriptors.length; i++) {
    const d = descriptors[i]!;
    const entries = d.entries;
    if (!Array.isArray(entries) || entries.length < RLS_BOUNDS.entries.min) return `descriptors[${i}].entries: must not be empty`;
    if (entries.length > RLS_BOUNDS.entries.max) return `descriptors[${i}].entries: at most ${RLS_BOUNDS.entries.max} per descriptor`;
    for (let j = 0; j < entries.length; j++) {
      const e = entries[j]!;
      if (typeof e.key !== "string" || e.key === "") return `descriptors[${i}].entries[${j}].key: must not be empty`;
      if (e.value !== undefined && typeof e.value !== "string") return `descriptors[${i}].entries[${j}].value: must be a string`;
    }
    const limit = d.limit;
    if (limit !== undefined && limit !== null) {
      const rpu = limit.requests_per_unit ?? 0;
      const { min, max } = RLS_BOUNDS.requestsPerUnit;
      if (!Number.isInteger(rpu) || rpu < min || rpu > max) return `descriptors[${i}].limit.requests_per_unit: must be an integer from ${min} to ${max}`;
      const unit = overrideUnitNumber(limit.unit);
      if (unit === undefined || unit === 0) return `descriptors[${i}].limit.unit: must be SECOND, MINUTE, HOUR, DAY, MONTH or YEAR`;
    }
    const own = d.hits_addend;
    if (own !== undefined && own !== null) {
      const v = own.value ?? 0;
      if (!Number.isInteger(v) || v < 0) return `descriptors[${i}].hits_addend: must be a non-negative integer`;
    }
  }
  return undefined;
}

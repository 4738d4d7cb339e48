/**
 * Every error the HTTP contract can answer, defined once: status line, the `data.error`
 * text clients see, and a stable code used in logs and tests. The texts for 400, 401, 429
 * and 500 are the spec's; the others are DESIGN §2's.
 */
export interface ErrorDef {
  readonly code: string;
  readonly status: number;
  readonly statusLine: string;
  readonly message: string;
}

function def(code: string, status: number, message: string): ErrorDef {
  return Object.freeze({ code, status, statusLine: `${status} ${message}`, message });
}

export const Errors = Object.freeze({
  badRequest: def("BAD_REQUEST", 400, "Bad Request"),
  unauthorized: def("UNAUTHORIZED", 401, "Unauthorized"),
  notFound: def("NOT_FOUND", 404, "Not Found"),
  methodNotAllowed: def("METHOD_NOT_ALLOWED", 405, "Method Not Allowed"),
  payloadTooLarge: def("PAYLOAD_TOO_LARGE", 413, "Payload Too Large"),
  unsupportedMediaType: def("UNSUPPORTED_MEDIA_TYPE", 415, "Unsupported Media Type"),
  rateLimited: def("RATE_LIMITED", 429, "Rate limit exceeded"),
  internal: def("INTERNAL", 500, "Internal server error"),
  unavailable: def("UNAVAILABLE", 503, "Service Unavailable"),
});

export type ErrorName = keyof typeof Errors;

/** A field-level validation problem; `message` never echoes the value sent. */
export interface FieldProblem {
  field: string;
  message: string;
}

import type { HttpResponse } from "uWebSockets.js";
/**
 * Every error the HTTP contract can answer, defined once: the HTTP status line (standard
 * reason phrase), the `data.error` text clients see, and a stable code used in logs and
 * tests. The body texts are the contract's (docs/api.md); they differ from the reason
 * phrase where the contract says so (429 "Rate limit exceeded", 500 "Internal server error").
 */
export interface ErrorDef {
  readonly code: string;
  readonly status: number;
  readonly statusLine: string;
  readonly message: string;
}

function def(code: string, status: number, reasonPhrase: string, message = reasonPhrase): ErrorDef {
  return Object.freeze({ code, status, statusLine: `${status} ${reasonPhrase}`, message });
}

export const Errors = Object.freeze({
  badRequest: def("BAD_REQUEST", 400, "Bad Request"),
  unauthorized: def("UNAUTHORIZED", 401, "Unauthorized"),
  forbidden: def("FORBIDDEN", 403, "Forbidden"),
  notFound: def("NOT_FOUND", 404, "Not Found"),
  methodNotAllowed: def("METHOD_NOT_ALLOWED", 405, "Method Not Allowed"),
  payloadTooLarge: def("PAYLOAD_TOO_LARGE", 413, "Payload Too Large"),
  unsupportedMediaType: def("UNSUPPORTED_MEDIA_TYPE", 415, "Unsupported Media Type"),
  rateLimited: def("RATE_LIMITED", 429, "Too Many Requests", "Rate limit exceeded"),
  internal: def("INTERNAL", 500, "Internal Server Error", "Internal server error"),
  unavailable: def("UNAVAILABLE", 503, "Service Unavailable"),
});

/** A field-level validation problem; `message` never echoes the value sent. */
export interface FieldProblem {
  field: string;
  message: string;
}

/**
 * Answer an error outside the decision pipeline (a route's 404/405, GET /cluster, GET /top,
 * /metrics): its status line, a 401's challenge (RFC 9110 §11.6.1), `Allow` for a 405, and
 * the JSON body (envelope.ts errorBody). The pipeline's door writes its own (door.ts).
 */
export function endWithError(res: HttpResponse, error: ErrorDef, body: string, allow?: string): void {
  res.writeStatus(error.statusLine);
  if (error === Errors.unauthorized) res.writeHeader("WWW-Authenticate", "Bearer");
  if (allow !== undefined) res.writeHeader("Allow", allow);
  res.writeHeader("Content-Type", "application/json").end(body);
}

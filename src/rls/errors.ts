/**
 * Every way an RLS call fails, once: the gRPC status code it gets (and the HTTP status of
 * POST /json). Over the limit is not among them: that is an answer (OVER_LIMIT).
 */
export const RLS_ERRORS = Object.freeze({
  /** no valid API key in `authorization: Bearer …` */
  unauthenticated: { grpc: 16, http: 401, message: "missing or invalid API key (authorization: Bearer <key>)" },
  /** a scoped key and a domain outside its namespaces */
  permissionDenied: { grpc: 7, http: 403, message: "this API key is not allowed this domain" },
  /** a field is wrong; the message names it */
  invalidArgument: { grpc: 3, http: 400, message: "invalid request" },
  /** FAIL_OPEN=false and an owner could not decide */
  unavailable: { grpc: 14, http: 503, message: "the owner of a descriptor's count could not be reached" },
  internal: { grpc: 13, http: 500, message: "internal error" },
  /** a method this server does not serve */
  unimplemented: { grpc: 12, http: 404, message: "no such method" },
  /** a request message over the size bound */
  resourceExhausted: { grpc: 8, http: 413, message: "request message too large" },
} as const);

export type RlsErrorKind = keyof typeof RLS_ERRORS;

export interface RlsFailure {
  kind: RlsErrorKind;
  message: string;
}

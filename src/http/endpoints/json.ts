import { requestProblem } from "../../rls/request-check.js";
import type { RlsFailure, RlsErrorKind } from "../../rls/errors.js";
import type { RlsService } from "../../rls/rls-service.js";
import { RLS_BOUNDS } from "../../rls/wire/fields.js";
import { isOverLimit, JsonFieldError, rlsRequestFromJson, rlsResponseJson } from "../../rls/wire/json.js";
import type { RlsRequest, RlsResponse } from "../../rls/wire/messages.js";
import { KeyScope } from "../../auth/api-keys.js";
import type { Endpoint, Parsed } from "../endpoint.js";
import { jsonHeaders } from "../envelope.js";
import { Errors, type ErrorDef } from "../errors.js";

/** The RLS call as POST /json hands it to the service: the answer, or why there is none. */
export interface JsonOutcome {
  failure: RlsFailure | undefined;
  response: RlsResponse | undefined;
}

/** What POST /json needs of the rate limit service: its one decision, whatever the door. */
export type RlsDecisions = Pick<RlsService, "shouldRateLimit">;

const TOO_MANY_REQUESTS = "429 Too Many Requests";

/** An RLS failure as the HTTP error of the same meaning. */
const FAILURE_ERRORS: Record<RlsErrorKind, ErrorDef> = {
  unauthenticated: Errors.unauthorized,
  permissionDenied: Errors.forbidden,
  invalidArgument: Errors.badRequest,
  unavailable: Errors.unavailable,
  internal: Errors.internal,
  unimplemented: Errors.notFound,
  resourceExhausted: Errors.payloadTooLarge,
};

/**
 * POST /json: Envoy's ShouldRateLimit in proto3 JSON on the main port, as envoyproxy/ratelimit
 * serves it (docs/envoy.md). The request is read by rls/wire/json.ts and checked as the gRPC
 * port checks it (400 naming the field, nothing counted); the decision is the RLS service's,
 * the same object the gRPC port calls, so both doors count and answer alike. The answer is
 * the RateLimitResponse in proto3 JSON: 200 when OK, 429 when OVER_LIMIT.
 */
export function jsonEndpoint(service: RlsDecisions): Endpoint<RlsRequest, JsonOutcome> {
  return {
    path: "/json",
    // the gRPC port's message bound: one set of bounds for both doors
    maxBodyBytes: RLS_BOUNDS.messageBytes,
    parse(body: unknown): Parsed<RlsRequest> {
      let request: RlsRequest;
      try {
        request = rlsRequestFromJson(body);
      } catch (err) {
        if (err instanceof JsonFieldError) return { ok: false, problems: [{ field: err.field, message: err.problem }] };
        throw err;
      }
      const problem = requestProblem(request);
      if (problem === undefined) return { ok: true, query: request };
      const colon = problem.indexOf(": ");
      return { ok: false, problems: [{ field: problem.slice(0, colon), message: problem.slice(colon + 2) }] };
    },
    // The domain is the namespace a scoped key is held to (403, nothing counted).
    admits: (scope, request) => scope.admits(request.domain!),
    decideNow: () => undefined,
    // The scope was checked above, by the pipeline.
    decide: (_decider, request, _now, done) => service.shouldRateLimit(request, KeyScope.ANY, (failure, response) => done({ failure, response })),
    // The service fails open itself, descriptor by descriptor, and counts it; a throw is a 500.
    failOpen: () => undefined,
    degraded: () => null,
    answer(a, _request, outcome) {
      if (outcome.failure !== undefined) return FAILURE_ERRORS[outcome.failure.kind];
      const response = outcome.response!;
      return a.set(
        isOverLimit(response) ? 429 : 200,
        isOverLimit(response) ? TOO_MANY_REQUESTS : undefined,
        jsonHeaders(a.ringVersion),
        rlsResponseJson(response),
      );
    },
    countAnswer: (metrics, a) => metrics.countEndpoint("/json", a.status),
    countRefusal: (metrics, status) => metrics.countEndpoint("/json", status),
  };
}

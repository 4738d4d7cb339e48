import type { Logger } from "../logger.js";
import type { KeyScope } from "../auth/api-keys.js";
import { RLS_ERRORS, type RlsFailure } from "./errors.js";
import type { RlsService } from "./rls-service.js";
import { decodeRateLimitRequest, DecodeError } from "./wire/codec.js";
import { echo } from "./wire/fields.js";
import type { RlsResponse } from "./wire/messages.js";
import { HEALTH_SERVICE_NAME, RLS_SERVICE_NAME } from "./wire/protos.js";

/**
 * What a gRPC call on the RLS port is, whichever HTTP/2 server carries it (grpc/ on
 * node:http2, h2/ of our own): the methods, the statuses, grpc-timeout and grpc-message,
 * the decoder's refusals and how one ShouldRateLimit is answered. Both servers answer from
 * here, so they cannot drift apart.
 */

export const SHOULD_RATE_LIMIT = `/${RLS_SERVICE_NAME}/ShouldRateLimit`;
export const CHECK = `/${HEALTH_SERVICE_NAME}/Check`;
export const WATCH = `/${HEALTH_SERVICE_NAME}/Watch`;

/** gRPC status codes answered outside RLS_ERRORS (those are the RLS service's own failures) */
export const NOT_FOUND = 5;
export const DEADLINE_EXCEEDED = 4;

const TIMEOUT_UNIT_MS: Readonly<Record<string, number>> = Object.freeze({ H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 });

/**
 * grpc-timeout in ms, at least 1: at most 8 digits and a unit (H M S m u n), as gRPC over
 * HTTP/2 writes it; undefined when malformed (the call then gets the default deadline).
 */
export function grpcTimeoutMs(value: string): number | undefined {
  const m = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (m === null) return undefined;
  return Math.max(1, Math.ceil(Number(m[1]) * TIMEOUT_UNIT_MS[m[2]!]!));
}

// grpc-message's encoding lives with the HTTP/2 server's blocks, which must not import this layer
export { percentEncoded } from "./h2/response-blocks.js";

/**
 * What the answer says of a request the decoder refused: a DecodeError is named with the
 * message type, a field the codec bounds (RequestFieldError) names itself. undefined: `err`
 * is a fault, not a refusal.
 */
export function refusal(err: unknown, messageType: string): string | undefined {
  if (err instanceof DecodeError) return `request: not a ${messageType} (${echo(err.message)})`;
  // its message is the codec's own: the field's name and the rule, caller input already cut short
  if (err instanceof Error && err.name === "RequestFieldError") return err.message;
  return undefined;
}

/** How a server writes the one answer of a call: a failure, or the response. */
export type AnswerCall = (failure: RlsFailure | undefined, response: RlsResponse | undefined) => void;

/**
 * One ShouldRateLimit: the message decoded (a refusal is INVALID_ARGUMENT naming why), the
 * service asked, and `answer` called exactly once, also when the service calls back twice or
 * throws. A fault in one call answers that call INTERNAL; its message stays in the log and
 * never reaches the client. A forwarded decision is answered when its owner replies; it
 * counts whether or not the client is still there.
 */
export function serveShouldRateLimit(message: Buffer, scope: KeyScope, service: Pick<RlsService, "shouldRateLimit">, logger: Logger, answer: AnswerCall): void {
  let request;
  try {
    request = decodeRateLimitRequest(message);
  } catch (err) {
    const why = refusal(err, "RateLimitRequest");
    if (why === undefined) throw err;
    return answer({ kind: "invalidArgument", message: why }, undefined);
  }
  let answered = false;
  const once: AnswerCall = (failure, response) => {
    if (answered) return;
    answered = true;
    answer(failure, response);
  };
  try {
    service.shouldRateLimit(request, scope, once);
  } catch (err) {
    logger.error({ err }, "RLS call failed");
    once({ kind: "internal", message: RLS_ERRORS.internal.message }, undefined);
  }
}

import type { RemovedState, ResetOutcome, ResetQuery } from "../../decision.js";
import type { Endpoint } from "../endpoint.js";
import { ENVELOPE, envelopeHead, jsonHeaders, jsonString, requestTail } from "../envelope.js";
import { Errors } from "../errors.js";
import { toResetQuery } from "../validation.js";
import { MAX_BODY_BYTES } from "./limit.js";

/** POST /limit/reset: remove the states of one identifier on its owner (docs/api.md). */
export const resetEndpoint: Endpoint<ResetQuery, ResetOutcome> = {
  path: "/limit/reset",
  maxBodyBytes: MAX_BODY_BYTES,
  parse: toResetQuery,
  admits: (scope, query) => scope.admits(query.namespace),
  decideNow: () => undefined,
  decide: (decider, query, now, done) => decider.reset(query, now, done),
  // A reset cannot fail open: not reaching the owner means nothing was removed.
  failOpen: () => undefined,
  degraded: () => null,
  answer(a, query, outcome) {
    if (!outcome.ok) return Errors.unavailable;
    return a.set(
      200,
      undefined,
      jsonHeaders(a.ringVersion),
      resetBody(a.ids.ok(), a.receivedAt, query.namespace, query.identifier, outcome.removed, a.processingMs),
    );
  },
  countAnswer: (metrics, a) => metrics.countEndpoint("/limit/reset", a.status),
  countRefusal: (metrics, status) => metrics.countEndpoint("/limit/reset", status),
};

export function resetBody(
  id: string,
  timestamp: number,
  namespace: string,
  identifier: string,
  removed: readonly RemovedState[],
  processingMs: number,
): string {
  return (
    envelopeHead(id, timestamp, ENVELOPE.rateLimitReset) +
    '"namespace":' +
    jsonString(namespace) +
    ',"identifier":' +
    jsonString(identifier) +
    ',"removed":' +
    JSON.stringify(removed) +
    requestTail(true, processingMs)
  );
}

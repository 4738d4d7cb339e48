import type { Decision, LimitQuery } from "../../decision.js";
import type { Endpoint } from "../endpoint.js";
import { queryDecisionHeaders, ENVELOPE, envelopeHead, jsonString, requestTail } from "../envelope.js";
import { Outcome } from "../../metrics/namespace-outcomes.js";
import { Errors } from "../errors.js";
import { toChargeQuery } from "../validation.js";
import { MAX_BODY_BYTES } from "./limit.js";

/**
 * POST /limit/charge: usage reported after the fact (docs/api.md). The cost is counted
 * whatever remains, never refused for want of room (a debt), and a negative cost is a
 * refund; the answer is always 200 and says where the key stands. A charge cannot fail
 * open: an owner out of reach is a 503, and what it means for the count is said there.
 */
export const chargeEndpoint: Endpoint<LimitQuery, Decision> = {
  path: "/limit/charge",
  maxBodyBytes: MAX_BODY_BYTES,
  parse: toChargeQuery,
  admits: (scope, query) => scope.admits(query.namespace),
  decideNow: (decider, query, now) => (decider.decideSync !== undefined ? decider.decideSync(query, now) : undefined),
  decide: (decider, query, now, done) => decider.decide(query, now, done),
  failOpen: () => undefined,
  degraded: (d) => d.degraded,
  answer(a, query, d) {
    // Degraded: the owner did not answer (FAIL_OPEN=true answers it too, as a 503: no decision to report).
    if (d.degraded !== null) return d.degraded === "internal" ? Errors.internal : Errors.unavailable;
    const now = a.receivedAt;
    const limit = d.applied !== null ? d.applied.limit : query.limit;
    const headers = queryDecisionHeaders(query, d, now, a.ringVersion);
    return a.set(
      200,
      undefined,
      headers,
      envelopeHead(a.ids.ok(), now, ENVELOPE.rateLimit) + chargeFields(query, d, limit) + requestTail(true, a.processingMs),
    );
  },
  countAnswer(metrics, a, query, d) {
    metrics.countRequest(a.status, query.algorithm.code);
    // A charge is counted whatever it answers: "allowed" unless it left the key in debt.
    metrics.namespaces.count(query.namespace, d.debt > 0 ? Outcome.blocked : Outcome.allowed);
    metrics.decisionSeconds.observe(a.processingMs / 1000);
  },
  countRefusal(metrics, status, query) {
    metrics.countRequest(status, query?.algorithm.code ?? -1);
    if (query !== undefined && (status === 500 || status === 503)) metrics.namespaces.count(query.namespace, Outcome.degraded);
  },
};

/**
 * `count` is what the key counts now (above `limit` in debt), `debt` how far past the limit,
 * `remaining` 0 in debt, `reset_time` when the whole limit is back, `retry_after` (seconds,
 * ms exact) when a request of 1 is allowed again: 0 while one is allowed now.
 */
function chargeFields(q: LimitQuery, d: Decision, limit: number): string {
  const count = d.debt > 0 ? limit + d.debt : limit - d.remaining;
  return (
    '"allowed":' +
    d.allowed +
    ',"namespace":' +
    jsonString(q.namespace) +
    ',"identifier":' +
    jsonString(q.identifier) +
    ',"limit":' +
    limit +
    ',"cost":' +
    q.cost +
    ',"count":' +
    count +
    ',"remaining":' +
    d.remaining +
    ',"debt":' +
    d.debt +
    ',"reset_time":' +
    d.resetTime +
    ',"retry_after":' +
    (d.remaining > 0 ? 0 : d.retryAfterMs / 1000) +
    ',"algorithm":"' +
    (d.applied !== null ? d.applied.algorithm.name : q.algorithm.name) +
    (d.shadow ? '","shadow":true' : '"') +
    // A charge with an id says whether this answer is the remembered one of an earlier charge (nothing counted now).
    (q.chargeId !== undefined ? ',"charge_id":' + jsonString(q.chargeId) + ',"duplicate":' + (d.duplicate === true) : "")
  );
}

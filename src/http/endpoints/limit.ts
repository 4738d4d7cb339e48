import { failOpenDecision, newDecision, type Decision, type LimitQuery } from "../../decision.js";
import type { Endpoint } from "../endpoint.js";
import { allowedBody, blockedBody, queryDecisionHeaders } from "../envelope.js";
import { Outcome } from "../../metrics/namespace-outcomes.js";
import { Errors } from "../errors.js";
import { toLimitQuery } from "../validation.js";
import { leaseFor } from "./lease-of.js";

/** Bodies above 16 KiB are refused with 413 (docs/api.md, Errors). */
export const MAX_BODY_BYTES = 16 * 1024;

/** The fail-open answer's Decision, reused: an outcome is only valid during the call it is passed to. */
const failOpenScratch: Decision = newDecision();

/** POST /limit: one request, one decision (docs/api.md). */
export const limitEndpoint: Endpoint<LimitQuery, Decision> = {
  path: "/limit",
  maxBodyBytes: MAX_BODY_BYTES,
  parse: toLimitQuery,
  admits: (scope, query) => scope.admits(query.namespace),
  decideNow: (decider, query, now) => (decider.decideSync !== undefined ? decider.decideSync(query, now) : undefined),
  decide: (decider, query, now, done) => decider.decide(query, now, done),
  failOpen: (query, now, reason) => failOpenDecision(query, now, reason, failOpenScratch),
  degraded: (d) => d.degraded,
  answer(a, query, d) {
    const now = a.receivedAt;
    const headers = queryDecisionHeaders(query, d, now, a.ringVersion);
    if (d.allowed) return a.set(200, undefined, headers, allowedBody(a.ids.ok(), now, query, d, a.processingMs, leaseFor(a.leases, query, d)));
    const blockedHeaders = headers + "\r\nRetry-After: " + Math.max(1, Math.ceil(d.retryAfterMs / 1000));
    return a.set(429, Errors.rateLimited.statusLine, blockedHeaders, blockedBody(a.ids.error(), now, query, d, a.processingMs));
  },
  countAnswer(metrics, a, query, d) {
    metrics.countRequest(a.status, query.algorithm.code);
    metrics.namespaces.count(query.namespace, d.degraded !== null ? Outcome.degraded : d.allowed ? Outcome.allowed : Outcome.blocked);
    if (d.shadow) metrics.namespaces.countShadow(query.namespace);
    // Only blocked decisions touch the top offenders' summary (a cached block is one too).
    else if (!d.allowed && d.degraded === null) metrics.topBlocked.blocked(query.namespace, query.identifier, a.receivedAt);
    metrics.decisionSeconds.observe(a.processingMs / 1000);
  },
  countRefusal(metrics, status, query) {
    metrics.countRequest(status, query?.algorithm.code ?? -1);
    // A valid query refused 500/503: its decision failed or its owner was out of reach with
    // FAIL_OPEN=false, the namespace's degraded answers. (400, 401, 403 decide nothing.)
    if (query !== undefined && (status === 500 || status === 503)) metrics.namespaces.count(query.namespace, Outcome.degraded);
  },
};

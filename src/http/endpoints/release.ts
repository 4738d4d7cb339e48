import { concurrency } from "../../algorithms/concurrency.js";
import type { LimitQuery, ReleaseOutcome, ReleaseQuery } from "../../decision.js";
import { MAX_LEASE_CHARS, type LeaseTokens } from "../../leases/lease-token.js";
import type { Endpoint } from "../endpoint.js";
import { ENVELOPE, envelopeHead, jsonHeaders, jsonString, requestTail } from "../envelope.js";
import { Errors } from "../errors.js";
import { toLimitQuery } from "../validation.js";
import { MAX_BODY_BYTES } from "./limit.js";

const BAD_LEASE = "must be a lease this service issued for this key (at most 128 characters)";

/**
 * POST /limit/release (docs/api.md, Concurrency): the key's fields and `lease`, optionally
 * `renew: true`. Idempotent: a lease released already, or lapsed, answers 200 with
 * `released: false`. Its signature is checked here, on whichever member the request came
 * in by; the release itself is the owner's (Decider.release).
 */
export function releaseEndpoint(leases: LeaseTokens): Endpoint<ReleaseQuery, ReleaseOutcome> {
  return {
    path: "/limit/release",
    maxBodyBytes: MAX_BODY_BYTES,
    parse(body) {
      const key = toLimitQuery(body);
      if (!key.ok) return key;
      const q = key.query;
      if (q.algorithm !== concurrency) return { ok: false, problems: [{ field: "algorithm", message: "must be concurrency" }] };
      const { lease, renew } = body as { lease?: unknown; renew?: unknown };
      if (renew !== undefined && typeof renew !== "boolean") return { ok: false, problems: [{ field: "renew", message: "must be a boolean" }] };
      if (typeof lease !== "string" || lease.length === 0) return { ok: false, problems: [{ field: "lease", message: "is required" }] };
      const opened = lease.length > MAX_LEASE_CHARS ? undefined : leases.open(lease, q.namespace, q.identifier, q.duration);
      if (opened === undefined) return { ok: false, problems: [{ field: "lease", message: BAD_LEASE }] };
      return { ok: true, query: { query: { ...q, cost: 1 }, lapseS: opened.lapseS, leaseId: opened.id, renew: renew === true } };
    },
    admits: (scope, rq) => scope.admits(rq.query.namespace),
    decideNow: () => undefined,
    decide: (decider, rq, now, done) => decider.release(rq, now, (outcome) => done(outcome)),
    // Not reaching the owner frees nothing: the caller may retry, or let the lease lapse.
    failOpen: () => undefined,
    degraded: () => null,
    answer(a, rq, outcome) {
      if (!outcome.ok) return Errors.unavailable;
      const q = rq.query;
      const renewed = outcome.renewedLapseS > 0 ? leases.mint(q.namespace, q.identifier, q.duration, outcome.renewedLapseS) : undefined;
      return a.set(200, undefined, jsonHeaders(a.ringVersion), releaseBody(a.ids.ok(), a.receivedAt, q, outcome.released, renewed, outcome, a.processingMs));
    },
    countAnswer: (metrics, a) => metrics.countEndpoint("/limit/release", a.status),
    countRefusal: (metrics, status) => metrics.countEndpoint("/limit/release", status),
  };
}

function releaseBody(
  id: string,
  timestamp: number,
  q: LimitQuery,
  released: boolean,
  lease: string | undefined,
  outcome: { renewedLapseS: number; remaining: number },
  processingMs: number,
): string {
  return (
    envelopeHead(id, timestamp, ENVELOPE.rateLimitRelease) +
    '"namespace":' +
    jsonString(q.namespace) +
    ',"identifier":' +
    jsonString(q.identifier) +
    ',"released":' +
    released +
    (lease !== undefined ? ',"lease":"' + lease + '","reset_time":' + outcome.renewedLapseS + ',"remaining":' + outcome.remaining : "") +
    requestTail(true, processingMs)
  );
}

// Imported rather than the global: see server.ts.
import { performance } from "node:perf_hooks";
import { failOpenBatch, type BatchOutcome, type LimitQuery, type ResetOutcome } from "../decision.js";
import { Endpoint } from "../metrics/metrics.js";
import { batchAllowedBody, batchBlockedBody, resetBody } from "./envelope-batch.js";
import { jsonHeaders } from "./envelope.js";
import { Errors, type ErrorDef, type FieldProblem } from "./errors.js";
import type { Exchange } from "./exchange.js";
import type { IdGenerator } from "./ids.js";
import type { Decider } from "../decision.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics/metrics.js";
import { toBatchQueries, toResetQuery } from "./validation.js";

/** What POST /limit/batch and POST /limit/reset need of the front end that received them. */
export interface ExchangeEnds {
  readonly deps: {
    readonly decider: Decider;
    readonly metrics: Metrics;
    readonly ids: IdGenerator;
    readonly logger: Logger;
    readonly directory: { readonly version: string };
  };
  readonly failOpen: boolean;
  /** the front end's one way to write an answer (server.ts): status, CRLF-joined headers, body */
  respond(x: Exchange, statusLine: string | undefined, headers: string, body: string): void;
  reject(x: Exchange, error: ErrorDef, details?: readonly FieldProblem[]): void;
  finish(x: Exchange): void;
  internalError(x: Exchange, err: unknown): void;
}

/** POST /limit/batch after the body parsed as JSON (docs/api.md). */
export function answerBatchRequest(ends: ExchangeEnds, x: Exchange, parsed: unknown): void {
  const result = toBatchQueries(parsed);
  if (!result.ok) return ends.reject(x, Errors.badRequest, result.problems);
  const queries = result.queries;
  // All or nothing, like the batch itself: one item outside the key's scope refuses it.
  for (const q of queries) if (!x.scope.admits(q.namespace)) return ends.reject(x, Errors.forbidden);
  try {
    ends.deps.decider.decideBatch(queries, x.receivedAt, (outcome) => answerBatch(ends, x, queries, outcome));
  } catch (err) {
    if (x.done) return ends.internalError(x, err);
    ends.deps.logger.error({ err }, "batch decision failed");
    answerBatch(ends, x, queries, failOpenBatch(queries, x.receivedAt, "internal"));
  }
}

function answerBatch(ends: ExchangeEnds, x: Exchange, queries: readonly LimitQuery[], outcome: BatchOutcome): void {
  if (x.done) return;
  if (x.aborted) {
    x.done = true;
    return ends.finish(x);
  }
  const { metrics, ids } = ends.deps;
  if (outcome.degraded !== null) {
    metrics.countDegraded(outcome.degraded);
    if (!ends.failOpen) return ends.reject(x, outcome.degraded === "internal" ? Errors.internal : Errors.unavailable);
  }
  let wait = -1;
  for (const d of outcome.decisions) if (!d.allowed && d.retryAfterMs > wait) wait = d.retryAfterMs;
  const processingMs = performance.now() - x.startedAt;
  x.done = true;
  // No RateLimit headers: a batch has several policies (docs/api.md).
  const headers = jsonHeaders(ends.deps.directory.version);
  if (wait < 0) {
    ends.respond(x, undefined, headers, batchAllowedBody(ids.ok(), x.receivedAt, queries, outcome.decisions, outcome.degraded !== null, processingMs));
    metrics.countEndpoint(Endpoint.batch, 200);
  } else {
    const body = batchBlockedBody(ids.error(), x.receivedAt, queries, outcome.decisions, wait, processingMs);
    ends.respond(x, Errors.rateLimited.statusLine, headers + "\r\nRetry-After: " + Math.max(1, Math.ceil(wait / 1000)), body);
    metrics.countEndpoint(Endpoint.batch, 429);
  }
  metrics.countBatchItems(queries.length);
  ends.finish(x);
}

/** POST /limit/reset after the body parsed as JSON (docs/api.md). */
export function answerResetRequest(ends: ExchangeEnds, x: Exchange, parsed: unknown): void {
  const result = toResetQuery(parsed);
  if (!result.ok) return ends.reject(x, Errors.badRequest, result.problems);
  const query = result.query;
  if (!x.scope.admits(query.namespace)) return ends.reject(x, Errors.forbidden);
  const answer = (outcome: ResetOutcome) => {
    if (x.done) return;
    if (x.aborted) {
      x.done = true;
      return ends.finish(x);
    }
    // A reset cannot fail open: not reaching the owner means nothing was removed.
    if (!outcome.ok) return ends.reject(x, Errors.unavailable);
    const body = resetBody(ends.deps.ids.ok(), x.receivedAt, query.namespace, query.identifier, outcome.removed, performance.now() - x.startedAt);
    x.done = true;
    ends.respond(x, undefined, jsonHeaders(ends.deps.directory.version), body);
    ends.deps.metrics.countEndpoint(Endpoint.reset, 200);
    ends.finish(x);
  };
  try {
    ends.deps.decider.reset(query, x.receivedAt, answer);
  } catch (err) {
    ends.internalError(x, err);
  }
}

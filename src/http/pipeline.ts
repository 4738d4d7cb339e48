// Imported rather than the global: in Node 20 globalThis.performance is a lazy getter that
// optimised code cannot inline (LoadGlobalIC + a getter call on every request in `perf`).
import { performance } from "node:perf_hooks";
import type { Decider, Decision } from "../decision.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics/metrics.js";
import { Answer } from "./endpoint.js";
import { Errors, type ErrorDef, type FieldProblem } from "./errors.js";
import type { Exchange } from "./exchange.js";
import type { IdGenerator } from "./ids.js";
import type { LeaseTokens } from "../leases/lease-token.js";

/**
 * Where the pipeline writes: the door a request came in by. The HTTP door (door.ts) writes
 * to uWebSockets.js; a door of another protocol maps the same calls onto its own framing.
 */
export interface Door<R> {
  /** write a decided answer (the endpoint's status line, headers and body) */
  write(x: Exchange<R>, statusLine: string | undefined, headers: string, body: string): void;
  /** write a refusal; `close`: and close the connection (the body was not, or not all, read) */
  refuse(x: Exchange<R>, error: ErrorDef, details: readonly FieldProblem[] | undefined, close: boolean): void;
}

export interface PipelineDeps {
  readonly decider: Decider;
  readonly metrics: Metrics;
  readonly ids: IdGenerator;
  readonly logger: Logger;
  readonly directory: { readonly version: string };
  /** concurrency leases (leases/lease-token.ts); unset: this process's own key */
  readonly leases?: LeaseTokens;
}

/**
 * The decision pipeline, once for every endpoint and every door: a parsed body → the
 * endpoint's query → key scope (403) → the decider → the guard → the endpoint's answer →
 * the door, with the metrics and the in-flight count. The guard: an exchange is answered
 * at most once (`done`), never after its caller left (`aborted`), and a degraded outcome
 * is counted and, with FAIL_OPEN=false, refused with 500/503. A decision that throws
 * fails open (or is refused) instead of reaching the caller.
 *
 * It knows no HTTP library: the door reads, authenticates and parses the request, and
 * writes what the pipeline hands it.
 */
export class DecisionPipeline<R> {
  /** exchanges begun and not finished: a drain waits for 0 */
  inFlight = 0;
  private readonly answer: Answer;

  constructor(
    private readonly deps: PipelineDeps,
    private readonly failOpen: boolean,
    private readonly door: Door<R>,
  ) {
    this.answer = new Answer(deps.ids, deps.directory, deps.leases);
  }

  begin(): void {
    this.inFlight++;
  }

  /** The request's body, parsed as JSON (or as its protocol says): decide and answer it. */
  run(x: Exchange<R>, body: unknown): void {
    const endpoint = x.endpoint;
    const parsed = endpoint.parse(body);
    if (!parsed.ok) return this.refuse(x, Errors.badRequest, parsed.problems);
    const query: unknown = parsed.query;
    x.query = query;
    // Checked on the effective namespace (with the product slug): the one the counters live
    // under and the answer names. A 403 counts nothing.
    if (!endpoint.admits(x.scope, query)) return this.refuse(x, Errors.forbidden);
    const decider = this.deps.decider;
    try {
      // A local decision comes back synchronously, without a `done` closure per request.
      const outcome: unknown = endpoint.decideNow(decider, query, x.receivedAt);
      if (outcome !== undefined) this.settle(x, outcome);
      else {
        const done = (o: unknown): boolean => this.settle(x, o);
        x.pending = done;
        endpoint.decide(decider, query, x.receivedAt, done);
      }
    } catch (err) {
      const fallback: unknown = x.done ? undefined : endpoint.failOpen(query, x.receivedAt, "internal");
      if (fallback === undefined) return this.internalError(x, err);
      this.deps.logger.error({ err, endpoint: endpoint.path }, "decision failed");
      this.settle(x, fallback);
    }
  }

  /**
   * The decider's outcome (now or later): through the guard to the endpoint's answer and the
   * door. False when the caller had left and nothing was written (the decider gives back
   * what it counted for an answer nobody received).
   */
  settle(x: Exchange<R>, outcome: unknown): boolean {
    if (x.done) return !x.aborted;
    if (x.aborted) {
      // The caller left while a forwarded decision was on its way: its handle is gone.
      x.done = true;
      this.finish(x);
      return false;
    }
    const endpoint = x.endpoint;
    const reason = endpoint.degraded(outcome);
    if (reason !== null) {
      this.deps.metrics.countDegraded(reason);
      if (!this.failOpen) {
        this.refuse(x, reason === "internal" ? Errors.internal : Errors.unavailable);
        return true;
      }
    }
    const answer = this.answer;
    answer.receivedAt = x.receivedAt;
    answer.processingMs = performance.now() - x.startedAt;
    const refusal = endpoint.answer(answer, x.query, outcome);
    if (refusal !== undefined) {
      this.refuse(x, refusal);
      return true;
    }
    x.done = true;
    this.door.write(x, answer.statusLine, answer.headers, answer.body);
    endpoint.countAnswer(this.deps.metrics, answer, x.query, outcome);
    this.finish(x);
    return true;
  }

  /** Refuse with an error (counted), once; `close` also closes the connection after it. */
  refuse(x: Exchange<R>, error: ErrorDef, details?: readonly FieldProblem[], close = false): void {
    if (x.done) return;
    x.done = true;
    x.endpoint.countRefusal(this.deps.metrics, error.status, x.query);
    if (!x.aborted) this.door.refuse(x, error, details, close);
    this.finish(x);
  }

  /** An exception outside the decision: logged (never shown), 500 if nothing was written yet. */
  internalError(x: Exchange<R>, err: unknown): void {
    this.deps.logger.error({ err }, "request failed");
    if (!x.done) this.refuse(x, Errors.internal);
  }

  /** The caller left (its connection closed): a decision still on its way is told to the decider. */
  left(x: Exchange<R>): void {
    x.aborted = true;
    const pending = x.pending;
    x.pending = undefined;
    if (!x.done && pending !== undefined) this.deps.decider.left?.(pending as (d: Decision) => boolean);
    this.finish(x);
  }

  /** The exchange is over (answered, refused or aborted): once. */
  finish(x: Exchange<R>): void {
    if (x.finished) return;
    x.finished = true;
    this.inFlight--;
  }
}

import type { Decider, DegradedReason } from "../decision.js";
import type { Metrics } from "../metrics/metrics.js";
import type { KeyScope } from "../auth/api-keys.js";
import type { ErrorDef, FieldProblem } from "./errors.js";
import type { IdGenerator } from "./ids.js";
import { processLeaseTokens, type LeaseTokens } from "../leases/lease-token.js";

/** A request body read as a query, or what is wrong with it (a 400 naming each field). */
export type Parsed<Q> = { ok: true; query: Q } | { ok: false; problems: FieldProblem[] };

/**
 * One front door's own logic, and nothing else (docs/architecture.md, Adding an endpoint):
 * how a parsed body becomes a query, which decider call answers it, and how the outcome
 * becomes bytes. Routing, body reading, auth, Content-Type, JSON, the done/abort/fail-open
 * guard and writing the answer are the pipeline's (pipeline.ts) and the door's (door.ts).
 * Nothing here knows uWebSockets.js: a door of another protocol runs the same endpoints.
 *
 * `Q` is the query, `O` the decider's outcome. Every method is called synchronously;
 * an outcome is only valid during the call it is passed to.
 */
export interface Endpoint<Q, O> {
  /** the route, and the `endpoint` label of its metrics */
  readonly path: string;
  /** bodies above this are refused with 413 and the connection closed */
  readonly maxBodyBytes: number;
  /** the JSON body (already parsed) → the query */
  parse(body: unknown): Parsed<Q>;
  /** whether a key of this scope may ask this query (403 otherwise; nothing is counted) */
  admits(scope: KeyScope, query: Q): boolean;
  /** the outcome now when it can be had synchronously (a local decision), sparing a closure; undefined: decide() */
  decideNow(decider: Decider, query: Q, now: number): O | undefined;
  /** ask the decider; `done` is called once, now or later */
  /** `done` returns false when the caller had left: its answer was not written (Decider.decide) */
  decide(decider: Decider, query: Q, now: number, done: (outcome: O) => boolean): void;
  /** the outcome when the decision threw: the fail-open answer, or undefined when this endpoint cannot fail open (500) */
  failOpen(query: Q, now: number, reason: DegradedReason): O | undefined;
  /** why an outcome is not an exact answer (counted; 500/503 with FAIL_OPEN=false), or null */
  degraded(outcome: O): DegradedReason | null;
  /** fill `answer` from the outcome, or return the error to refuse with instead */
  answer(answer: Answer, query: Q, outcome: O): ErrorDef | undefined;
  /** count a written answer; `answer` holds its status and processing time, `outcome` is the one it was made from */
  countAnswer(metrics: Metrics, answer: Answer, query: Q, outcome: O): void;
  /** count a refusal; `query` is undefined when it came before the body was parsed */
  countRefusal(metrics: Metrics, status: number, query: Q | undefined): void;
}

/** Any endpoint, as the pipeline and the doors hold them. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyEndpoint = Endpoint<any, any>;

/**
 * What an endpoint fills in for the answer the pipeline then writes: one per pipeline,
 * reused for every answer (answers are written synchronously), so no object per request.
 * `headers` is the Content-Type value with any other headers joined to it by CRLF: the
 * door writes it in one writeHeader call (measured: see door.ts).
 */
export class Answer {
  /** HTTP status, for the metrics */
  status = 200;
  /** undefined for 200 */
  statusLine: string | undefined = undefined;
  headers = "";
  body = "";
  /** set by the pipeline before answer(): when the request was received (unix ms), and how long it took */
  receivedAt = 0;
  processingMs = 0;

  constructor(
    readonly ids: IdGenerator,
    private readonly directory: { readonly version: string },
    /** mints the leases of allowed concurrency decisions (docs/api.md, Concurrency) */
    readonly leases: LeaseTokens = processLeaseTokens(),
  ) {}

  /** the ring version every answer carries (RingLimit-Ring-Version) */
  get ringVersion(): string {
    return this.directory.version;
  }

  set(status: number, statusLine: string | undefined, headers: string, body: string): undefined {
    this.status = status;
    this.statusLine = statusLine;
    this.headers = headers;
    this.body = body;
    return undefined;
  }
}

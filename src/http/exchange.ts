import { KeyScope } from "../auth/api-keys.js";
import type { AnyEndpoint } from "./endpoint.js";

/**
 * One request in flight through the decision pipeline, whatever door it came in by; `R`
 * is the door's handle on the caller (uWS's HttpResponse for HTTP). A class rather than an
 * object literal: V8 clones literals of more than 6 properties through the runtime
 * (CopyJSObjectWithAllocationSite showed in a `perf` profile), while `new` of a class is
 * allocated inline by optimised code.
 */
export class Exchange<R = unknown> {
  /** the caller left: the door's handle must not be touched */
  aborted = false;
  /** answered or refused: nothing more is written */
  done = false;
  /** the endpoint's query, once parsed */
  query: unknown = undefined;
  /** the namespaces the caller's key may use (set once the key is verified) */
  scope: KeyScope = KeyScope.ANY;
  /** inFlight already decremented */
  finished = false;
  /** HTTP door: inside uWS's onData callback, where writes are already corked */
  inData = false;
  /** HTTP door: bytes of the body so far, and the copy of them when it comes in several chunks */
  received = 0;
  body: Buffer | undefined = undefined;
  /** the `done` a decider holds while a decision is on its way, told to it if the caller leaves */
  pending: ((outcome: unknown) => boolean) | undefined = undefined;

  constructor(
    readonly res: R,
    readonly endpoint: AnyEndpoint,
    /** unix ms: the decision's `now` and the envelope timestamp */
    readonly receivedAt: number,
    /** performance.now(), for processing_time_ms */
    readonly startedAt: number,
  ) {}
}

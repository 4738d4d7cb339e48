import type { HttpResponse } from "uWebSockets.js";
import type { LimitQuery } from "../decision.js";
import type { Endpoint } from "../metrics/metrics.js";
import { KeyScope } from "./auth.js";

/**
 * One POST (/limit, /limit/batch or /limit/reset) in flight. A class rather than an object literal: V8 clones literals of
 * more than 6 properties through the runtime (CopyJSObjectWithAllocationSite showed in a
 * `perf` profile), while `new` of a class is allocated inline by optimised code.
 */
export class Exchange {
  aborted = false;
  done = false;
  query: LimitQuery | undefined = undefined;
  /** the namespaces the caller's key may use (set once the key is verified) */
  scope: KeyScope = KeyScope.ANY;
  /** inFlight already decremented */
  finished = false;
  /** inside uWS's onData callback, where writes are already corked */
  inData = false;
  /** bytes of the body so far, and the copy of them when it comes in several chunks */
  received = 0;
  body: Buffer | undefined = undefined;

  constructor(
    readonly res: HttpResponse,
    readonly endpoint: Endpoint,
    /** unix ms: the decision's `now` and the envelope timestamp */
    readonly receivedAt: number,
    /** performance.now(), for processing_time_ms */
    readonly startedAt: number,
  ) {}
}

import type { AlgorithmName } from "../algorithms/registry.js";

export type { AlgorithmName };

/** One rate-limit check: the body of POST /limit. */
export interface LimitRequest {
  namespace: string;
  /** slugified and appended to the namespace by the service: `namespace.slug` */
  product?: string;
  identifier: string;
  limit: number;
  /** seconds */
  duration: number;
  algorithm?: AlgorithmName;
  /** what this check weighs: 1 by default, 0 is a peek (counts nothing); never above `limit` */
  cost?: number;
}

/** POST /limit/charge's body: a cost counted whatever remains (debt), a refund when negative; limit up to 2^32 − 1. */
export interface ChargeRequest extends Omit<LimitRequest, "cost"> {
  /** a non-zero integer from −1e9 to 1e9 */
  cost: number;
  /**
   * Names the charge (sent as `charge_id`: 1 to 64 visible ASCII characters, e.g. a UUID): the
   * key's owner counts it at most once, so a charge whose answer was lost is retried once with it
   * (docs/client.md). Absent: sent once, never retried.
   */
  chargeId?: string;
}

/**
 * The outcome of charge(): never a rejection. `counted`: true on a 200; false when refused or
 * when the key's owner could not be reached (503); "unknown" when no answer came back in time
 * (the charge may have been counted once). A charge without an id is never sent again; one with
 * an id (`chargeId`) is sent once more when the first answer was lost, and its second answer is
 * the result (`retried`): a 200 is `counted` true whether this or the first one counted it
 * (`data.duplicate`).
 */
export interface ChargeResult {
  counted: boolean | "unknown";
  /** a charge with an id sent a second time because the first answer was lost (status 0 or 503) */
  retried?: boolean;
  status: number;
  /** 200: count, remaining, debt, reset_time, retry_after, and with an id charge_id and duplicate (docs/api.md) */
  data: (LimitData & { debt?: number; cost?: number; charge_id?: string; duplicate?: boolean }) | undefined;
  headers: RateLimitHeaders;
  source: AnswerSource;
}

/** limit() with an estimated cost, and settle(actual) to charge or refund the difference (docs/client.md). */
export interface Reservation extends LimitResult {
  settle(actual: number): Promise<ChargeResult | undefined>;
}

/** The body of POST /limit/release: the key as acquired and its lease (docs/api.md, Concurrency). */
export interface ReleaseRequest {
  namespace: string;
  product?: string;
  identifier: string;
  limit: number;
  duration: number;
  algorithm: "concurrency";
  lease: string;
  /** free the slot and hold a fresh one under a new lease (`data.lease`) */
  renew?: boolean;
}

/** The body of POST /limit/reset: every state of an identifier, or the one named by algorithm and duration. */
export interface ResetRequest {
  namespace: string;
  product?: string;
  identifier: string;
  algorithm?: AlgorithmName;
  duration?: number;
}

/**
 * The outcome of reset(): never a rejection. A reset cannot fail open: `ok` is true only when
 * the owner removed the states (`data.removed` lists them).
 */
export interface ResetResult {
  ok: boolean;
  /** HTTP status; 0 when no node answered in time */
  status: number;
  data:
    | { namespace?: string; identifier?: string; removed?: { algorithm: AlgorithmName; duration: number }[]; error?: string; [field: string]: unknown }
    | undefined;
  source: AnswerSource;
}

/** The `data` of an answer of POST /limit (docs/api.md, README "The request"). */
export interface LimitData {
  allowed?: boolean;
  namespace?: string;
  identifier?: string;
  limit?: number;
  remaining?: number;
  /** unix seconds */
  reset_time?: number;
  count?: number;
  algorithm?: AlgorithmName;
  /** set on a fail-open answer of a node that could not reach the key's owner */
  degraded?: boolean;
  /** 429: seconds until one request is allowed, to the millisecond */
  retry_after?: number;
  /** an allowed concurrency answer: the slot's lease, for release() */
  lease?: string;
  /** POST /limit/batch: one entry per request, in order */
  results?: LimitData[];
  /** error answers */
  error?: string;
  status?: number;
  details?: { field: string; message: string }[];
  [field: string]: unknown;
}

/** The IETF rate-limit headers of an answer (draft-ietf-httpapi-ratelimit-headers), lower-case names, to pass on. */
export interface RateLimitHeaders {
  "ratelimit-policy"?: string;
  ratelimit?: string;
  "retry-after"?: string;
}

/** Where an answer came from. */
export type AnswerSource =
  /** the key's owner on the client's ring */
  | "owner"
  /** another node, which forwarded to the owner (the owner was unknown, unreachable or the ring was not known yet) */
  | "fallback"
  /** this client's memory of an earlier 429 whose retry_after has not passed */
  | "cache"
  /** no node answered in time: this client's own fail-open (or fail-closed) answer */
  | "client";

/**
 * The outcome of limit(): never a rejection.
 *
 * - 200 and 429 answers are the service's decision (`degraded` when a node failed open).
 * - No answer in time (every node unreachable, or later than timeoutMs): `allowed` is the
 *   client's `failOpen`, `degraded: true`, `status: 0`, no data.
 * - 500 and 503 (a node failing closed): `allowed: failOpen`, `degraded: true`, with the status.
 * - Other 4xx (a bad request, a wrong API key): `allowed: false`: the service could not check
 *   this request, and allowing it would let a caller skip its limit by sending a bad one.
 *   401 and 403 are reported to the logger once; `failOpenOnAuthError` allows them instead.
 */
export interface LimitResult {
  allowed: boolean;
  degraded: boolean;
  status: number;
  data: LimitData | undefined;
  headers: RateLimitHeaders;
  source: AnswerSource;
}

export interface RingLimitClientOptions {
  /** one or more node URLs (e.g. a Kubernetes Service): the client discovers the other members from them */
  urls: string | readonly string[];
  /** a bearer key of the service (`svc_sk_…`) */
  apiKey: string;
  /** ms; a check with no answer by then resolves with `allowed: failOpen, degraded: true`. Default 50 */
  timeoutMs?: number;
  /** the answer when no node answers in time. Default true */
  failOpen?: boolean;
  /** keep-alive connections per node. Default 16 */
  connections?: number;
  /** "owner" (default): each check goes to its key's owner. "round-robin": over the members, as a load balancer would */
  routing?: "owner" | "round-robin";
  /** ms an unreachable node is skipped before it is tried again (doubling, up to 5 s, while it stays unreachable). Default 1000 */
  retryNodeAfterMs?: number;
  /** TLS options for https:// nodes */
  tls?: { ca?: string | Buffer | readonly (string | Buffer)[]; rejectUnauthorized?: boolean; servername?: string };
  /**
   * ms a check issued before the first GET /cluster has answered waits for it; then (or as
   * soon as it answers or fails) the check is sent, to its owner or to the URLs given, and its
   * timeoutMs starts. 0: sent to the URLs given at once. Default 1000
   */
  discoveryWaitMs?: number;
  /**
   * What the service refuses for the key (401, or 403 for a namespace outside its scope):
   * false (default) refuses the check, fail-closed by design: a wrong key is a configuration
   * error to fix, not an outage to ride out. true allows it, marked degraded
   */
  failOpenOnAuthError?: boolean;
  /**
   * Hosts, besides the seeds' own, that the client sends its API key to when GET /cluster
   * lists them: exact names, `*.example.com`, CIDR ranges (`10.0.0.0/8`). A member outside
   * them (or a plain http:// one of an https:// cluster) is not used: its checks go through
   * a seed. Default: the seeds' hosts only
   */
  memberHosts?: readonly string[];
  /** where the client reports what the app must hear about (a refused key, an answer it does not trust, the cluster down and back), once each. Default: console.warn. pino and bunyan loggers fit */
  logger?: ClientLogger;
  /**
   * Called once when no node answers any more (the client answers checks itself: `failOpen`,
   * degraded) and once when one answers again; besides the logger's warning. An error it
   * throws is reported and ignored
   */
  onDegraded?: (event: DegradedEvent) => void;
}

/** The cluster went down (`degraded: true`) or came back (`degraded: false`), as the client sees it. */
export interface DegradedEvent {
  degraded: boolean;
  /** why the client answers itself: no node within timeoutMs, or every node unreachable; undefined when back */
  reason: "timeout" | "unavailable" | undefined;
  /** Date.now() when it went down (for `degraded: false`, of the outage that ended) */
  since: number;
  /** with `degraded: false`: the checks the client answered itself during the outage */
  answeredByClient: number;
}

/** A logger the client reports to: pino's and bunyan's signature (details first). */
export interface ClientLogger {
  warn(details: Record<string, unknown>, message: string): void;
}

/** Counters of one client since it was created. */
export interface ClientStats {
  /** limit() calls */
  calls: number;
  /** answered by the key's owner on this client's ring */
  owner: number;
  /** answered by another node (which forwarded) */
  fallback: number;
  /** 429 answered from the client's blocked cache */
  cachedBlocks: number;
  /** resolved by the client itself because no node answered in time (fail-open or fail-closed) */
  degraded: number;
  /** ...of which: the deadline passed */
  timeouts: number;
  /** ...of which: no node was reachable (every one refused, reset or was marked down) */
  unavailable: number;
  /** answers a node marked degraded (it could not reach the key's owner) */
  serverDegraded: number;
  /** connections refused, reset or failed (each attempt) */
  connectionErrors: number;
  /** answers 401 or 403: the service refused the key (reported once through the logger) */
  authFailures: number;
  /** answers that are not what a node answers (a 200 that is not an allowed decision, a body too long): not believed */
  invalidAnswers: number;
  /** GET /cluster fetches that succeeded / failed */
  refreshes: number;
  refreshFailures: number;
}

/** Defaults of RingLimitClientOptions, in one place. */
export const CLIENT_DEFAULTS = Object.freeze({
  // ms: a check unanswered by then resolves allowed: failOpen, degraded: true. Above the
  // servers' PEER_TIMEOUT_MS (100 ms by default, src/config.ts; a test holds the two apart):
  // a node that forwards a check to an owner that hangs answers it degraded itself after
  // PEER_TIMEOUT_MS, and that answer must reach the client before its own deadline, or the
  // healthy node is taken for the hung one (issue 32: at 50 ms, one SIGSTOPped node of three
  // made ~3 s of every check degraded, those of the two healthy owners included).
  timeoutMs: 150,
  failOpen: true,
  connections: 16, // keep-alive connections per node
  routing: "owner" as "owner" | "round-robin",
  retryNodeAfterMs: 1000, // ms an unreachable node is skipped (doubling while it stays so, up to 5 s)
  // ms checks issued at start wait for the first GET /cluster: long enough for a cold
  // connection (TCP, TLS, undici's parser compiled on first use) on a loaded machine, where
  // it took 90-150 ms against a 50 ms timeoutMs (load average 28), short enough that a
  // client whose discovery hangs starts checking through its seed URLs within a second.
  discoveryWaitMs: 1000,
  failOpenOnAuthError: false,
});

import type { ClientLogger, ClientStats, DegradedEvent } from "./types.js";

/** The default logger: one line on stderr per report (console.warn), details as JSON. */
export const consoleLogger: ClientLogger = {
  warn(details, message) {
    console.warn(`ringlimit-client: ${message} ${JSON.stringify(details)}`);
  },
};

/**
 * What goes wrong that the app must hear about, reported through its logger once rather
 * than per check (a wrong key would otherwise log on every request). The API key itself is
 * never written.
 */
export class ClientReporter {
  /** a 401 was reported, and no check has been accepted since */
  private unauthorizedReported = false;
  /** effective namespaces a 403 was reported for (a key scoped to other namespaces) */
  private readonly forbiddenReported = new Set<string>();
  private readonly distrusted = new Set<string>();

  /** performance.now() of the last answer from any node (a node that answers is up, whatever it said) */
  private lastAnswer = performance.now();
  /** since when (Date.now()) no node has answered, while the client answers checks itself; undefined: the cluster answers */
  private downSince: number | undefined;
  /** checks the client answered itself since downSince */
  private answeredAlone = 0;

  constructor(
    private readonly logger: ClientLogger,
    private readonly counters: ClientStats,
    private readonly failOpenOnAuthError: boolean,
    private readonly failOpen: boolean,
    private readonly timeoutMs: number,
    private readonly onDegraded: ((event: DegradedEvent) => void) | undefined,
  ) {}

  /**
   * The client answered a check itself: no node answered in time ("timeout") or none could be
   * tried ("unavailable"). The cluster is taken for down when no node has answered anything for
   * timeoutMs (one slow check among answered ones is not an outage), or when none can be tried;
   * that is reported once, and again only after a node has answered since.
   */
  unreachable(reason: "timeout" | "unavailable"): void {
    if (this.downSince !== undefined) return void this.answeredAlone++;
    if (reason === "timeout" && performance.now() - this.lastAnswer < this.timeoutMs) return;
    this.downSince = Date.now();
    this.answeredAlone = 1;
    const then = this.failOpen ? "checks are ALLOWED unchecked (failOpen: true)" : "checks are refused (failOpen: false)";
    this.logger.warn(
      { reason, failOpen: this.failOpen },
      `no ringlimit node answers (${reason === "timeout" ? "none within timeoutMs" : "every node unreachable"}): ${then} until one answers again`,
    );
    this.notify({ degraded: true, reason, since: this.downSince, answeredByClient: 0 });
  }

  /** A node answered (any status): reported once when the cluster was taken for down. */
  reachable(): void {
    this.lastAnswer = performance.now();
    if (this.downSince === undefined) return;
    const since = this.downSince;
    const answeredByClient = this.answeredAlone;
    this.downSince = undefined;
    this.answeredAlone = 0;
    const downForMs = Date.now() - since;
    this.logger.warn({ downForMs, answeredByClient }, `a ringlimit node answers again after ${downForMs} ms: checks are decided by the cluster again`);
    this.notify({ degraded: false, reason: undefined, since, answeredByClient });
  }

  private notify(event: DegradedEvent): void {
    if (this.onDegraded === undefined) return;
    try {
      this.onDegraded(event);
    } catch (err) {
      // The app's hook must not break a check; what it threw is the app's to hear about.
      this.logger.warn({ error: err instanceof Error ? err.message : String(err) }, "onDegraded threw: ignored");
    }
  }

  /**
   * The service refused the client's key (401), or its scope for `namespace` (403).
   * A 401 is reported once, and again only after a check has been accepted since (a key
   * fixed, then broken again); a 403 once per namespace (the first MAX_FORBIDDEN_REPORTED).
   */
  authFailure(status: 401 | 403, url: string, what: string, namespace?: string): void {
    this.counters.authFailures++;
    if (status === 401) {
      if (this.unauthorizedReported) return;
      this.unauthorizedReported = true;
    } else {
      const ns = namespace ?? "";
      if (this.forbiddenReported.has(ns) || this.forbiddenReported.size >= MAX_FORBIDDEN_REPORTED) return;
      this.forbiddenReported.add(ns);
    }
    const why =
      status === 401
        ? "ringlimit refused the API key (401 Unauthorized)"
        : `ringlimit refused the API key for namespace ${JSON.stringify(namespace ?? "")} (403 Forbidden: the key is scoped to other namespaces)`;
    const then = this.failOpenOnAuthError
      ? "checks it refuses so are ALLOWED, unchecked (failOpenOnAuthError: true)"
      : "checks it refuses so are refused (fail-closed by design; failOpenOnAuthError: true admits them instead)";
    this.logger.warn(
      { status, node: url, request: what, ...(namespace !== undefined ? { namespace } : {}) },
      `${why}: ${then}. Check the key the client is given.`,
    );
  }

  /** Something a node answered that the client does not trust, reported once per `key` (the first MAX_FORBIDDEN_REPORTED). */
  distrust(key: string, details: Record<string, unknown>, message: string): void {
    if (this.distrusted.has(key) || this.distrusted.size >= MAX_FORBIDDEN_REPORTED) return;
    this.distrusted.add(key);
    this.logger.warn(details, message);
  }

  /** A check was accepted (200 or 429): a later 401 is news again. */
  accepted(): void {
    this.unauthorizedReported = false;
  }
}

/** Namespaces reported for a 403 (and distrusted answers), at most: the reports of a misconfiguration, not a log per caller. */
const MAX_FORBIDDEN_REPORTED = 100;

/** Every counter of ClientStats at zero. */
export function newStats(): ClientStats {
  return {
    calls: 0,
    owner: 0,
    fallback: 0,
    cachedBlocks: 0,
    degraded: 0,
    timeouts: 0,
    unavailable: 0,
    serverDegraded: 0,
    connectionErrors: 0,
    authFailures: 0,
    invalidAnswers: 0,
    refreshes: 0,
    refreshFailures: 0,
  };
}

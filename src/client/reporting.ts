import type { ClientLogger, ClientStats } from "./types.js";

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

  constructor(
    private readonly logger: ClientLogger,
    private readonly counters: ClientStats,
    private readonly failOpenOnAuthError: boolean,
  ) {}

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

import { Counter, Registry, collectDefaultMetrics } from "prom-client";
import { ALGORITHMS } from "../algorithms/index.js";
import { DEGRADED_REASONS, type DegradedReason } from "../decision.js";
import { FastHistogram } from "./fast-histogram.js";
import { NamespaceOutcomes } from "./namespace-outcomes.js";
import { pulledCounter, pulledGauge, pulledLabelledCounter } from "./pulled.js";
import { RenderCache } from "./render-cache.js";

const STATUSES = [200, 400, 401, 403, 404, 405, 413, 415, 429, 500, 503] as const;

export interface MetricSources {
  storedKeys: () => number;
  /** estimated bytes the state table holds, and its bound */
  storedBytes: () => number;
  maxStoredBytes: number;
  /** MAX_KEYS: the bound of each state table in keys */
  maxKeys: number;
  /** METRICS_MAX_NAMESPACES: namespaces labelled in ringlimit_namespace_requests_total */
  maxNamespaces: number;
  evictions: () => number;
  expirations: () => number;
  /** POST requests received and not answered yet */
  requestsInFlight: () => number;
  /** where POST answers note the identifiers they blocked (shard/top/top-blocked.ts, GET /top); none: not noted */
  topBlocked?: BlockedNotes;
}

/** What the front end notes of a block for GET /top: the sketch itself lives in shard/top/. */
export interface BlockedNotes {
  blocked(namespace: string, identifier: string, at: number): void;
}

const NOT_NOTED: BlockedNotes = { blocked: () => {} };

/**
 * Prometheus metrics. Hot-path counters are plain numbers in arrays, turned into
 * prom-client values only when /metrics is scraped: a labelled prom-client inc() builds a
 * label key string per call, which is too much for every request.
 */
export class Metrics {
  readonly registry = new Registry();
  /** [statusIndex * (ALGORITHMS.length + 1) + algorithmCode + 1]; algorithm slot 0 = none */
  private readonly requestCounts = new Float64Array(STATUSES.length * (ALGORITHMS.length + 1));
  private readonly degradedCounts = new Float64Array(DEGRADED_REASONS.length);
  /**
   * Answers by status index, per endpoint path other than /limit (that one is requestCounts).
   * A path gets its counters on its first answer, so an endpoint needs no entry here.
   */
  private readonly endpointCounts = new Map<string, Float64Array>();
  private batchItems = 0;
  readonly decisionSeconds: FastHistogram;
  /** POST /limit outcomes per namespace, bounded (namespace-outcomes.ts) */
  readonly namespaces: NamespaceOutcomes;
  /** the identifiers blocked most on this node, bounded (shard/top/top-blocked.ts, GET /top) */
  readonly topBlocked: BlockedNotes;
  private readonly rendered: RenderCache;
  private source: () => Promise<string> = () => this.registry.metrics();

  /** `renderIntervalMs`: /metrics text is rendered at most once per this many ms (0: every scrape). */
  constructor(sources: MetricSources, renderIntervalMs = 0, clock: () => number = Date.now) {
    const registry = this.registry;
    this.rendered = new RenderCache(() => this.source(), renderIntervalMs, clock);
    collectDefaultMetrics({ register: registry });
    const requestCounts = this.requestCounts;
    new Counter({
      name: "ringlimit_requests_total",
      help: "Answers to POST /limit by HTTP status and algorithm",
      labelNames: ["status", "algorithm"],
      registers: [registry],
      collect() {
        this.reset();
        STATUSES.forEach((status, s) => {
          for (let a = -1; a < ALGORITHMS.length; a++) {
            const n = requestCounts[s * (ALGORITHMS.length + 1) + a + 1]!;
            if (n > 0) this.inc({ status: String(status), algorithm: a < 0 ? "none" : ALGORITHMS[a]!.name }, n);
          }
        });
      },
    });
    const endpointCounts = this.endpointCounts;
    // Added beside ringlimit_requests_total, whose name and labels stay as they were (POST /limit only).
    new Counter({
      name: "ringlimit_endpoint_requests_total",
      help: "Answers by endpoint (/limit, /limit/batch, /limit/reset, ...) and HTTP status",
      labelNames: ["endpoint", "status"],
      registers: [registry],
      collect() {
        this.reset();
        STATUSES.forEach((status, s) => {
          let single = 0;
          for (let a = 0; a <= ALGORITHMS.length; a++) single += requestCounts[s * (ALGORITHMS.length + 1) + a]!;
          if (single > 0) this.inc({ endpoint: "/limit", status: String(status) }, single);
          for (const [endpoint, counts] of endpointCounts) if (counts[s]! > 0) this.inc({ endpoint, status: String(status) }, counts[s]!);
        });
      },
    });
    pulledCounter(registry, "ringlimit_batch_items_total", "Requests carried by answered POST /limit/batch calls", () => this.batchItems);
    pulledLabelledCounter(
      registry,
      "ringlimit_degraded_total",
      "Fail-open answers (200, degraded: true) by reason",
      "reason",
      DEGRADED_REASONS,
      this.degradedCounts,
    );
    this.decisionSeconds = new FastHistogram(
      "ringlimit_decision_seconds",
      "Time from request received to answer written, for decided requests",
      [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
      registry,
    );
    this.namespaces = new NamespaceOutcomes(registry, sources.maxNamespaces);
    this.topBlocked = sources.topBlocked ?? NOT_NOTED;
    pulledGauge(registry, "ringlimit_stored_keys", "Limit states stored on this node", sources.storedKeys);
    pulledGauge(registry, "ringlimit_requests_in_flight", "POST requests received and not answered yet (a drain waits for 0)", sources.requestsInFlight);
    pulledGauge(
      registry,
      "ringlimit_stored_bytes",
      "Bytes held by limit states as V8 lays them out: the owned and replica tables (keys, arrays at capacity, index, remembered resets), the blocked cache and the charge ids an owner remembers",
      sources.storedBytes,
    );
    pulledGauge(
      registry,
      "ringlimit_stored_bytes_limit",
      "Bound on ringlimit_stored_bytes (MAX_MEMORY_MB, or 30 % of V8's old space), shared by the tables and the blocked cache: states are evicted to stay under it",
      () => sources.maxStoredBytes,
    );
    // Exported so that alerts compare with the setting in force rather than a copy of it.
    pulledGauge(
      registry,
      "ringlimit_max_keys",
      "MAX_KEYS: limit states a table holds before it evicts (each of the owned and replica tables)",
      () => sources.maxKeys,
    );
    pulledCounter(registry, "ringlimit_evictions_total", "States evicted because the table reached MAX_KEYS or its byte bound", sources.evictions);
    pulledCounter(
      registry,
      "ringlimit_metrics_renders_total",
      "Times the /metrics text was rendered (at most once per METRICS_CACHE_MS; scrapes in between get the same text)",
      // the render being collected is counted already
      () => this.rendered.renders + 1,
    );
    pulledCounter(registry, "ringlimit_expirations_total", "States dropped by the expiry sweep", sources.expirations);
  }

  countRequest(status: number, algorithmCode: number): void {
    let s = STATUSES.indexOf(status as (typeof STATUSES)[number]);
    if (s < 0) s = STATUSES.indexOf(500);
    this.requestCounts[s * (ALGORITHMS.length + 1) + algorithmCode + 1]!++;
  }

  /** An answer of an endpoint other than POST /limit (that one is countRequest), by its path. */
  countEndpoint(path: string, status: number): void {
    let s = STATUSES.indexOf(status as (typeof STATUSES)[number]);
    if (s < 0) s = STATUSES.indexOf(500);
    let counts = this.endpointCounts.get(path);
    if (counts === undefined) this.endpointCounts.set(path, (counts = new Float64Array(STATUSES.length)));
    counts[s]!++;
  }

  countBatchItems(n: number): void {
    this.batchItems += n;
  }

  countDegraded(reason: DegradedReason): void {
    this.degradedCounts[DEGRADED_REASONS.indexOf(reason)]!++;
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /**
   * WORKERS > 1: the text is this registry's and every worker thread's counters summed
   * (workers/worker-pool.ts), still rendered at most once per interval.
   */
  renderFrom(source: () => Promise<string>): void {
    this.source = source;
  }

  /** The exposition text, rendered at most once per interval. */
  render(): Promise<string> {
    return this.rendered.get();
  }
}

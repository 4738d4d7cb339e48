import { Worker } from "node:worker_threads";
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from "prom-client";
import type { Config } from "../config.js";
import type { Decider } from "../decision.js";
import type { RingDirectory } from "../http/endpoints/cluster.js";
import type { TopQuery, TopResult } from "../http/endpoints/top.js";
import type { RlsDecisions } from "../http/endpoints/json.js";
import { KeyScope } from "../auth/api-keys.js";
import type { FrontEnd } from "../http/server.js";
import type { Logger } from "../logger.js";
import type { Policy } from "../policy/index.js";
import { BRAND } from "../policy/worker/transfer.js";
import type { BlockedNotes, Metrics } from "../metrics/metrics.js";
import { ByteRing } from "./byte-ring.js";
import { ANSWER_BYTES } from "./decision-codec.js";
import {
  fromWireQuery,
  fromWireRelease,
  fromWireReset,
  toWireBatch,
  type Call,
  type DirectoryView,
  type FromWorker,
  type ToWorker,
  type WorkerPolicy,
} from "./messages.js";
import { MAX_IN_FLIGHT, goneWords } from "./ring-decider.js";
import { RingServer } from "./ring-server.js";
import { releaseWatches, watchWords } from "./grpc-door.js";
import type { WorkerData } from "./worker-main.js";

/** Queries in flight from one worker: 1 MiB (a query's record is 40 bytes plus its key, at most ~3.5 KiB). */
const QUERY_RING_BYTES = 1 << 20;
/**
 * Answers: a power of two that holds MAX_IN_FLIGHT answers and one skipped tail, so the
 * owner's write always finds room (ring-server.ts's invariant).
 */
const ANSWER_RING_BYTES = 1 << Math.ceil(Math.log2((MAX_IN_FLIGHT + 1) * (ANSWER_BYTES + 4)));
/** How often the ring's view, /ready and the policy's state reach the workers. */
const PUSH_MS = 50;
const RESTART_MIN_MS = 100;
const RESTART_MAX_MS = 5000;
/** A worker that lived this long restarts at once again if it dies. */
const HEALTHY_MS = 10_000;
/** Past the drain's deadline, how long a worker may take to say what it still has in flight. */
const DRAIN_GRACE_MS = 1000;
/** How long a scrape waits for a worker's counters. */
const METRICS_WAIT_MS = 1000;
/** The control words' count: [ready, policy loaded, draining] */
const CONTROL_WORDS = 3;

export interface WorkerPoolDeps {
  config: Config;
  apiKeys: readonly string[];
  leaseRoot: Buffer;
  decider: Decider;
  /** the owner's listening app: it accepts and hands each connection to a worker */
  acceptor: FrontEnd;
  metrics: Metrics;
  topBlocked: BlockedNotes;
  top: (q: TopQuery) => Promise<TopResult>;
  directory: RingDirectory;
  isReady: () => boolean;
  /** why the node is not ready, which a worker's GET /ready names as this thread's does */
  notReadyReason: () => string | undefined;
  policyLoaded: () => boolean;
  /** POST /json's RLS service, and the gRPC door's */
  rls?: RlsDecisions;
  /** the policy in force: the workers resolve RLS requests with a copy, sent again when it changes */
  policy: () => Policy | undefined;
  /** set: the workers serve the gRPC port, this one (the owner checked that nothing holds it) */
  grpcPort?: number | undefined;
  logger: Logger;
}

interface Thread {
  index: number;
  worker: Worker;
  server: RingServer;
  descriptor: unknown;
  startedAt: number;
  restarts: number;
  metricsWaits: Map<number, (json: MetricObjectWithValues<MetricValue<string>>[]) => void>;
  drained?: (inFlight: number) => void;
}

/**
 * The state owner's side of WORKERS > 1 (docs/architecture.md, Threads): it starts the worker
 * threads, serves their decision rings on the node's Decider, answers their calls, keeps them
 * told of the ring and readiness, sums their counters into /metrics, drains them on SIGTERM
 * and restarts one that dies. The table, the cluster and every invariant stay on this thread.
 */
export class WorkerPool {
  private readonly threads: (Thread | undefined)[] = [];
  /** [ready, policy loaded, draining]: what every worker reads without a message */
  private readonly control = new Int32Array(new SharedArrayBuffer(4 * CONTROL_WORDS));
  /** the gRPC door's Watch streams, every worker together (grpc-door.ts) */
  private readonly watches: Int32Array;
  private stopping = false;
  private draining = false;
  private pushTimer: NodeJS.Timeout | undefined;
  private lastView = "";
  private lastReason: string | undefined;
  private nextMetricsId = 0;

  constructor(private readonly deps: WorkerPoolDeps) {
    this.watches = watchWords(deps.config.workers);
  }

  /** Start every worker; resolves when each one's app receives connections. */
  async start(): Promise<void> {
    this.push();
    this.pushTimer = setInterval(() => this.push(), PUSH_MS);
    this.pushTimer.unref();
    await Promise.all(Array.from({ length: this.deps.config.workers }, (_, i) => this.spawn(i, 0)));
  }

  private spawn(index: number, restarts: number): Promise<void> {
    const queries = ByteRing.create(QUERY_RING_BYTES);
    const answers = ByteRing.create(ANSWER_RING_BYTES);
    const gone = goneWords();
    const data: WorkerData = {
      index,
      config: this.deps.config,
      apiKeys: [...this.deps.apiKeys],
      leaseRoot: this.deps.leaseRoot,
      queries,
      answers,
      gone,
      control: this.control.buffer as SharedArrayBuffer,
      ...(this.deps.grpcPort !== undefined ? { grpcPort: this.deps.grpcPort } : {}),
      policy: this.policyCopy(),
      watches: this.watches.buffer as SharedArrayBuffer,
    };
    const worker = new Worker(new URL("./worker-main.js", import.meta.url), { workerData: data });
    const thread: Thread = {
      index,
      worker,
      server: new RingServer(queries, answers, gone, this.deps.decider, this.deps.logger),
      descriptor: undefined,
      startedAt: Date.now(),
      restarts,
      metricsWaits: new Map(),
    };
    this.threads[index] = thread;
    return new Promise((resolve, reject) => {
      worker.on("message", (m: FromWorker) => {
        if (m.t === "listening") {
          thread.descriptor = m.descriptor;
          this.deps.acceptor.addChild(m.descriptor);
          this.sendView(thread, true);
          thread.worker.postMessage({ t: "not-ready", reason: this.lastReason } satisfies ToWorker);
          resolve();
        } else this.onMessage(thread, m);
      });
      worker.on("error", (err) => this.deps.logger.error({ err, worker: index }, "worker thread failed"));
      worker.on("exit", (code) => {
        if (thread.descriptor === undefined) reject(new Error(`worker ${index} exited with code ${code} before listening`));
        this.exited(thread, code);
      });
    });
  }

  private exited(thread: Thread, code: number): void {
    if (thread.descriptor !== undefined) this.deps.acceptor.removeChild(thread.descriptor);
    thread.server.close();
    releaseWatches(this.watches, thread.index);
    thread.drained?.(0);
    if (this.threads[thread.index] === thread) this.threads[thread.index] = undefined;
    if (this.stopping) return;
    // Its connections closed with it (their callers saw the connection close); nothing it
    // counted is lost, as it counted nothing: the state is here.
    const restarts = Date.now() - thread.startedAt > HEALTHY_MS ? 0 : thread.restarts + 1;
    const delay = restarts === 0 ? 0 : Math.min(RESTART_MAX_MS, RESTART_MIN_MS * 2 ** (restarts - 1));
    this.deps.logger.warn({ worker: thread.index, code, restartInMs: delay }, "worker thread exited; restarting it");
    setTimeout(() => {
      if (this.stopping) return;
      this.spawn(thread.index, restarts).catch((err: unknown) => this.deps.logger.error({ err, worker: thread.index }, "worker thread did not restart"));
    }, delay).unref();
  }

  private onMessage(thread: Thread, m: FromWorker): void {
    switch (m.t) {
      case "call":
        return this.answerCall(thread, m.id, m.call);
      case "blocked":
        for (const [namespace, identifier, at] of m.notes) this.deps.topBlocked.blocked(namespace, identifier, at);
        return;
      case "metrics-json": {
        const wait = thread.metricsWaits.get(m.id);
        thread.metricsWaits.delete(m.id);
        return wait?.(m.json as MetricObjectWithValues<MetricValue<string>>[]);
      }
      case "drained":
        return thread.drained?.(m.inFlight);
    }
  }

  private answerCall(thread: Thread, id: number, call: Call): void {
    const reply = (value: unknown): void => {
      if (this.threads[thread.index] === thread) thread.worker.postMessage({ t: "reply", id, value } satisfies ToWorker);
    };
    const fail = (err: unknown): void => {
      // Logged here; the worker answers its caller as a failed decision, never with the message.
      this.deps.logger.error({ err, op: call.op }, "a worker's call failed");
      if (this.threads[thread.index] === thread) thread.worker.postMessage({ t: "reply", id, value: undefined, error: "internal" } satisfies ToWorker);
    };
    const decider = this.deps.decider;
    try {
      switch (call.op) {
        case "batch":
          return decider.decideBatch(call.queries.map(fromWireQuery), call.now, (o) => reply(toWireBatch(o)));
        case "reset":
          return decider.reset(fromWireReset(call.query), call.now, reply);
        case "release":
          return decider.release(fromWireRelease(call.query), call.now, reply);
        case "top":
          return void this.deps.top(call.query).then(reply, fail);
        case "metrics":
          return void this.deps.metrics.render().then(reply, fail);
        case "json":
          if (this.deps.rls === undefined) return fail(new Error("no RLS service"));
          return this.deps.rls.shouldRateLimit(call.request, new KeyScope(call.prefixes), (failure, response) => reply([failure, response]));
      }
    } catch (err) {
      fail(err);
    }
  }

  /**
   * The node's /metrics: this thread's registry and every worker's door counters, summed by
   * name and labels. From a worker only counters, histograms and its requests in flight are
   * taken: its process metrics are this process's (already here) and its other gauges are
   * the owner's facts (a sum would multiply them).
   */
  async renderMetrics(): Promise<string> {
    const own = await this.deps.metrics.registry.getMetricsAsJSON();
    const workers = await Promise.all(this.threads.map((t) => (t === undefined ? Promise.resolve([]) : this.workerMetrics(t))));
    const summed = workers.map((list) =>
      list.filter(
        (m) =>
          // ratelimit_*: the RLS service's counters under envoyproxy/ratelimit's names (USE_PROMETHEUS)
          (m.name.startsWith("ringlimit_") || m.name.startsWith("ratelimit_")) &&
          m.name !== "ringlimit_metrics_renders_total" &&
          (String(m.type) === "counter" || String(m.type) === "histogram" || m.name === "ringlimit_requests_in_flight"),
      ),
    );
    // prom-client's aggregate hashes every value's labels; a collector may leave them out.
    for (const list of [own, ...summed]) for (const m of list) for (const v of m.values) (v as { labels?: object }).labels ??= {};
    return AggregatorRegistry.aggregate([own, ...summed]).metrics();
  }

  private workerMetrics(thread: Thread): Promise<MetricObjectWithValues<MetricValue<string>>[]> {
    return new Promise((resolve) => {
      const id = this.nextMetricsId++;
      const timer = setTimeout(() => {
        thread.metricsWaits.delete(id);
        resolve([]);
      }, METRICS_WAIT_MS);
      thread.metricsWaits.set(id, (json) => {
        clearTimeout(timer);
        resolve(json);
      });
      thread.worker.postMessage({ t: "metrics-json", id } satisfies ToWorker);
    });
  }

  /** /ready (and its reason), the policy's state and the ring's view, as the workers answer them; now as well as every PUSH_MS. */
  push(): void {
    Atomics.store(this.control, 0, this.deps.isReady() && !this.draining ? 1 : 0);
    Atomics.store(this.control, 1, this.deps.policyLoaded() ? 1 : 0);
    const reason = this.deps.notReadyReason();
    if (reason !== this.lastReason) {
      this.lastReason = reason;
      for (const t of this.threads) if (t?.descriptor !== undefined) t.worker.postMessage({ t: "not-ready", reason } satisfies ToWorker);
    }
    const changed = this.view();
    if (changed) for (const t of this.threads) if (t?.descriptor !== undefined) this.sendView(t, false);
  }

  private currentView: DirectoryView | undefined;

  private view(): boolean {
    const d = this.deps.directory;
    const policyVersions: Record<string, string | null> = {};
    for (const m of d.members) policyVersions[m.id] = d.policyVersionOf(m.id);
    const view: DirectoryView = { self: d.self, version: d.version, members: d.members.map((m) => ({ ...m })), policyVersions, software: d.software?.() };
    const text = JSON.stringify(view);
    if (text === this.lastView) return false;
    this.lastView = text;
    this.currentView = view;
    return true;
  }

  private sendView(thread: Thread, fresh: boolean): void {
    if (fresh) this.view();
    if (this.currentView !== undefined) thread.worker.postMessage({ t: "directory", view: this.currentView } satisfies ToWorker);
  }

  /**
   * The policy as the workers get it: a compiled policy crosses as a structured clone (its
   * classes revived there, as from the compile worker). Any other (a test's own object) has
   * functions a clone cannot carry: its RLS requests are resolved here ("owner").
   */
  private policyCopy(): WorkerPolicy {
    const p = this.deps.policy();
    if (p === undefined) return { policy: undefined };
    return (p as unknown as Record<string, unknown>)[BRAND] === "LoadedPolicy" ? { policy: p } : "owner";
  }

  /**
   * A reload: every worker resolves with the new policy from the message's arrival. Until
   * then it may resolve a request with the old one, whole: a request never sees half of two.
   */
  policyChanged(): void {
    const policy = this.policyCopy();
    for (const t of this.threads) t?.worker.postMessage({ t: "policy", policy } satisfies ToWorker);
  }

  /** SIGTERM's first step: every worker's /ready answers 503 ("draining") from now on; connections stay open. */
  startDraining(): void {
    this.draining = true;
    // Before any worker hears of the drain, and before "not ready": from here every worker's
    // /ready says draining and no worker takes a new gRPC connection.
    Atomics.store(this.control, 2, 1);
    Atomics.store(this.control, 0, 0);
    for (const t of this.threads) t?.worker.postMessage({ t: "drain" } satisfies ToWorker);
  }

  /**
   * SIGTERM: resolves when every worker has finished the requests it has in flight, or at
   * `deadline`, with the count still in flight. Workers keep their connections open until
   * `stop`, as a single-thread node does until its drain ends.
   */
  async drain(deadline: number): Promise<number> {
    this.stopping = true;
    const left = await Promise.all(
      this.threads.map((t) =>
        t === undefined
          ? 0
          : new Promise<number>((resolve) => {
              t.drained = resolve;
              t.worker.postMessage({ t: "drain", deadline } satisfies ToWorker);
              // A worker that does not answer is counted as one request still in flight.
              setTimeout(() => resolve(1), Math.max(0, deadline - Date.now()) + DRAIN_GRACE_MS).unref();
            }),
      ),
    );
    return left.reduce((a, b) => a + b, 0);
  }

  /** Workers still serving: a worker thread's own gauge of requests in flight is summed in /metrics. */
  get size(): number {
    return this.threads.filter((t) => t !== undefined).length;
  }

  /** Each worker closes its connections and exits (never terminate(): see crash). */
  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.pushTimer);
    await Promise.all(
      this.threads.map((t) =>
        t === undefined
          ? undefined
          : new Promise<void>((resolve) => {
              t.worker.once("exit", () => resolve());
              t.worker.postMessage({ t: "exit" } satisfies ToWorker);
            }),
      ),
    );
  }

  /**
   * End worker `index` as a fatal fault in it does: it closes its connections (their callers
   * see them close) and exits, and is restarted. Not worker.terminate(): a thread ended with
   * uWS sockets still open takes the whole process down (Node asserts on closing a loop with
   * open handles), so a worker always closes its app before it exits.
   */
  crash(index: number): void {
    this.threads[index]?.worker.postMessage({ t: "exit" } satisfies ToWorker);
  }
}

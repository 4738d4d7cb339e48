import { parentPort, workerData } from "node:worker_threads";
import { Counter } from "prom-client";
import { ApiKeyVerifier } from "../auth/api-keys.js";
import type { Config } from "../config.js";
import type { ClusterMemberView, RingDirectory } from "../http/endpoints/cluster.js";
import type { SoftwareFacts } from "../peer/index.js";
import { IdGenerator } from "../http/ids.js";
import { FrontEnd, frontEndOptionsOf } from "../http/server.js";
import { LeaseTokens } from "../leases/lease-token.js";
import { createLogger } from "../logger.js";
import { Metrics } from "../metrics/metrics.js";
import type { DirectoryView, FromWorker, ToWorker } from "./messages.js";
import { RingDecider } from "./ring-decider.js";

/**
 * A worker thread (WORKERS > 1): the HTTP door and nothing else. It parses, authenticates and
 * validates as a single-thread node does (the same FrontEnd, door and pipeline), and asks the
 * state owner for every decision (ring-decider.ts). It holds no limit state: a worker that
 * dies loses only its connections, and worker-pool.ts starts another.
 */
export interface WorkerData {
  index: number;
  config: Config;
  /** the API keys in force, a generated one included: each thread verifies callers itself */
  apiKeys: string[];
  /** the lease key's root, the owner's: a lease minted by any thread is released by any other */
  leaseRoot: Buffer;
  queries: SharedArrayBuffer;
  answers: SharedArrayBuffer;
  /** Int32 words the owner keeps current: [ready, policy loaded] */
  control: SharedArrayBuffer;
}

/** Blocks noted for GET /top, sent to the owner's summary a few times a second, bounded per send. */
const BLOCKED_FLUSH_MS = 250;
const BLOCKED_MAX_PER_FLUSH = 4096;

const data = workerData as WorkerData;
const port = parentPort!;
const config = data.config;
const logger = createLogger(config.logLevel, config.nodeId).child({ worker: data.index });
const control = new Int32Array(data.control);
const decider = new RingDecider(data.queries, data.answers, port);
const send = (m: FromWorker): void => port.postMessage(m);

let blocked: [string, string, number][] = [];
const flushBlocked = setInterval(() => {
  if (blocked.length === 0) return;
  send({ t: "blocked", notes: blocked });
  blocked = [];
}, BLOCKED_FLUSH_MS);
flushBlocked.unref();

// This thread's counters: the owner sums them into the node's /metrics (worker-pool.ts).
const metrics: Metrics = new Metrics({
  storedKeys: () => 0,
  storedBytes: () => 0,
  maxStoredBytes: 0,
  maxKeys: config.maxKeys,
  maxNamespaces: config.metricsMaxNamespaces,
  evictions: () => 0,
  expirations: () => 0,
  requestsInFlight: (): number => frontEnd.inFlight,
  topBlocked: {
    blocked(namespace, identifier, at) {
      if (blocked.length < BLOCKED_MAX_PER_FLUSH) blocked.push([namespace, identifier, at]);
    },
  },
});
new Counter({
  name: "ringlimit_worker_requests_total",
  help: "Decisions and calls a worker thread asked the state owner for (WORKERS > 1), by worker",
  labelNames: ["worker"],
  registers: [metrics.registry],
  collect() {
    this.reset();
    this.inc({ worker: String(data.index) }, decider.decisions);
  },
});

class DirectoryMirror implements RingDirectory {
  view: DirectoryView = { self: "", version: "", members: [], policyVersions: {}, software: undefined };
  get self(): string {
    return this.view.self;
  }
  get version(): string {
    return this.view.version;
  }
  get members(): readonly ClusterMemberView[] {
    return this.view.members as ClusterMemberView[];
  }
  policyVersionOf(member: string): string | null {
    return this.view.policyVersions[member] ?? null;
  }
  software = (): SoftwareFacts => this.view.software as SoftwareFacts;
}
const directory = new DirectoryMirror();

const frontEnd: FrontEnd = new FrontEnd(
  // With METRICS_PORT the owner's admin app serves /metrics; this thread's is never listened on.
  frontEndOptionsOf(config),
  {
    decider,
    verifier: new ApiKeyVerifier(data.apiKeys, config.apiKeyHashes),
    ids: new IdGenerator(),
    metrics,
    logger,
    isReady: () => Atomics.load(control, 0) === 1,
    directory,
    top: (q) => decider.top(q),
    rls: decider,
    leases: new LeaseTokens(data.leaseRoot),
    policyLoaded: () => Atomics.load(control, 1) === 1,
    renderMetrics: () => decider.metrics(),
  },
);

port.on("message", (m: ToWorker) => {
  switch (m.t) {
    case "reply":
      return decider.replied(m.id, m.value, m.error);
    case "directory":
      directory.view = m.view;
      return;
    case "metrics-json":
      void metrics.registry.getMetricsAsJSON().then((json) => send({ t: "metrics-json", id: m.id, json }));
      return;
    case "drain":
      frontEnd.startDraining();
      if (m.deadline !== undefined) void drain(m.deadline);
      return;
    case "exit":
      return exit(1);
  }
});

/**
 * A fatal fault: the connections close first (a thread that ends with uWS sockets open takes
 * the process down with it), then the thread exits and the owner starts another.
 */
function exit(code: number): void {
  frontEnd.close();
  setTimeout(() => process.exit(code), 10);
}

/** SIGTERM, through the owner: the requests in flight finish (until the deadline); the connections stay open until "exit". */
async function drain(deadline: number): Promise<void> {
  while (frontEnd.inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  send({ t: "drained", inFlight: frontEnd.inFlight });
}

// As a single-thread node does (main.ts): a fault in one request is logged, the thread keeps serving.
process.on("uncaughtException", (err) => logger.error({ err }, "uncaught exception"));
process.on("unhandledRejection", (err) => logger.error({ err }, "unhandled rejection"));

send({ t: "listening", descriptor: frontEnd.descriptor() });

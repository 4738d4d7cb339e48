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
import type { DirectoryView, FromWorker, ToWorker, WorkerPolicy } from "./messages.js";
import type { RlsDecisions } from "../http/endpoints/json.js";
import type { Policy } from "../policy/index.js";
import { revivePolicy } from "../policy/policy.js";
import { RlsMetrics } from "../rls/rls-metrics.js";
import { RlsService } from "../rls/rls-service.js";
import { RingDecider } from "./ring-decider.js";
import { createGrpcDoor, grpcOptionsOf, rlsServiceOptionsOf, sharedWatchBudget, type GrpcDoor } from "./grpc-door.js";

/**
 * A worker thread (WORKERS > 1): the HTTP door and the gRPC door (GRPC_PORT) and nothing else.
 * It parses, authenticates and validates as a single-thread node does (the same FrontEnd, door
 * and pipeline, the same gRPC server, the same RLS service on a copy of the owner's policy),
 * and asks the state owner for every decision (ring-decider.ts). It holds no limit state: a worker that
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
  /** one word per decision slot: its caller left (ring-decider.ts) */
  gone: SharedArrayBuffer;
  /** Int32 words the owner keeps current: [ready, policy loaded, draining] (worker-pool.ts, CONTROL_WORDS) */
  control: SharedArrayBuffer;
  /** set: this thread listens on the gRPC port too, with SO_REUSEPORT beside the other workers */
  grpcPort?: number;
  /** the owner's policy when this thread started (then by "policy" messages) */
  policy: WorkerPolicy;
  /** the gRPC door's Watch streams, every worker together (grpc-door.ts) */
  watches: SharedArrayBuffer;
}

/** Blocks noted for GET /top, sent to the owner's summary a few times a second, bounded per send. */
const BLOCKED_FLUSH_MS = 250;
const BLOCKED_MAX_PER_FLUSH = 4096;

const data = workerData as WorkerData;
const port = parentPort!;
const config = data.config;
const logger = createLogger(config.logLevel, config.nodeId).child({ worker: data.index });
const control = new Int32Array(data.control);
const decider = new RingDecider(data.queries, data.answers, data.gone, port);
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
let grpcCalls = 0;
new Counter({
  name: "ringlimit_worker_grpc_calls_total",
  help: "ShouldRateLimit calls a worker thread's gRPC door received (WORKERS > 1, GRPC_PORT), by worker",
  labelNames: ["worker"],
  registers: [metrics.registry],
  collect() {
    this.reset();
    this.inc({ worker: String(data.index) }, grpcCalls);
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
const isReady = (): boolean => Atomics.load(control, 0) === 1;
const nodeDraining = (): boolean => Atomics.load(control, 2) === 1;
/** the owner's reason for not being ready, by "not-ready" messages */
let notReadyReason: string | undefined;
const verifier = new ApiKeyVerifier(data.apiKeys, config.apiKeyHashes);

// RLS (gRPC and POST /json): resolved here against a copy of the owner's policy, which stays
// the one source of truth (a reload is sent here); each descriptor is then decided by the
// owner over the ring, as a POST /limit is. A policy that cannot be copied: the owner resolves.
let policy: Policy | undefined;
let policyAtOwner = false;
const adoptPolicy = (p: WorkerPolicy): void => {
  try {
    policy = p === "owner" || p.policy === undefined ? undefined : revivePolicy(p.policy);
    policyAtOwner = p === "owner";
  } catch (err) {
    // Never a stale copy: the owner resolves until a copy arrives that this thread can use.
    logger.error({ err }, "the policy's copy could not be revived; RLS requests are resolved on the state owner");
    policyAtOwner = true;
  }
};
adoptPolicy(data.policy);
const localRls = new RlsService(rlsServiceOptionsOf(config), {
  decider,
  policy: () => policy,
  metrics: new RlsMetrics(metrics.registry, config.usePrometheus),
  countDegraded: (r) => metrics.countDegraded(r),
});
const rls: RlsDecisions = {
  shouldRateLimit: (request, scope, done) => (policyAtOwner ? decider : localRls).shouldRateLimit(request, scope, done),
};
const frontEnd: FrontEnd = new FrontEnd(
  // With METRICS_PORT the owner's admin app serves /metrics; this thread's is never listened on.
  frontEndOptionsOf(config),
  {
    decider,
    verifier,
    ids: new IdGenerator(),
    metrics,
    logger,
    isReady,
    notReadyReason: () => notReadyReason,
    nodeDraining,
    directory,
    top: (q) => decider.top(q),
    rls,
    leases: new LeaseTokens(data.leaseRoot),
    policyLoaded: () => Atomics.load(control, 1) === 1,
    renderMetrics: () => decider.metrics(),
  },
);

const grpc: GrpcDoor | undefined =
  data.grpcPort === undefined
    ? undefined
    : createGrpcDoor(config, grpcOptionsOf(config, { port: data.grpcPort, threads: config.workers, refusing: nodeDraining }), {
        service: {
          shouldRateLimit(request, scope, done) {
            grpcCalls++;
            rls.shouldRateLimit(request, scope, done);
          },
        },
        verifier,
        isReady,
        logger,
        watchBudget: sharedWatchBudget(new Int32Array(data.watches), data.index),
      });
let drainDeadline = 0;

port.on("message", (m: ToWorker) => {
  switch (m.t) {
    case "reply":
      return decider.replied(m.id, m.value, m.error);
    case "policy":
      return adoptPolicy(m.policy);
    case "directory":
      directory.view = m.view;
      return;
    case "not-ready":
      notReadyReason = m.reason;
      return;
    case "metrics-json":
      void metrics.registry.getMetricsAsJSON().then((json) => send({ t: "metrics-json", id: m.id, json }));
      return;
    case "drain":
      frontEnd.startDraining();
      grpc?.startDraining();
      if (m.deadline !== undefined) {
        drainDeadline = m.deadline;
        void drain(m.deadline);
      }
      return;
    case "exit":
      return exit(1);
  }
});

/**
 * The end, after a drain or on a fatal fault: the connections close first (a thread that ends
 * with uWS sockets open takes the process down with it); the gRPC connections get GOAWAY and
 * what is left of the drain's time to finish; then the thread exits (and the owner starts
 * another, unless the node is stopping).
 */
function exit(code: number): void {
  frontEnd.close();
  const closed = grpc?.close(Math.max(0, drainDeadline - Date.now())) ?? Promise.resolve();
  void closed.then(() => setTimeout(() => process.exit(code), 10));
}

/** SIGTERM, through the owner: the requests in flight finish (until the deadline); the connections stay open until "exit". */
async function drain(deadline: number): Promise<void> {
  const inFlight = (): number => frontEnd.inFlight + (grpc?.inFlight ?? 0);
  while (inFlight() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  send({ t: "drained", inFlight: inFlight() });
}

// As a single-thread node does (main.ts): a fault in one request is logged, the thread keeps serving.
process.on("uncaughtException", (err) => logger.error({ err }, "uncaught exception"));
process.on("unhandledRejection", (err) => logger.error({ err }, "unhandled rejection"));

// Listening on the gRPC port before the owner hands this thread any HTTP connection: a node
// that answers /ready serves gRPC from every worker.
void (grpc?.listen() ?? Promise.resolve(0)).then(
  () => send({ t: "listening", descriptor: frontEnd.descriptor() }),
  (err: unknown) => {
    logger.error({ err, port: data.grpcPort }, "a worker thread cannot listen on the gRPC port");
    exit(1);
  },
);

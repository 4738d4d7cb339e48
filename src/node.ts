import { ApiKeyVerifier, generateApiKey } from "./auth/api-keys.js";
import { ConfigError, type Config } from "./config.js";
import type { Decider } from "./decision.js";
import { FrontEnd, frontEndOptionsOf } from "./http/server.js";
import type { TopQuery, TopResult } from "./http/endpoints/top.js";
import { admitsOf } from "./shard/cluster/top-offenders.js";
import { IdGenerator } from "./http/ids.js";
import { describeListenError, ListenError } from "./http/listen.js";
import { uwsBuild } from "./http/uws.js";
import { createLogger, type Logger } from "./logger.js";
import { Metrics } from "./metrics/metrics.js";
import { assembleCluster } from "./shard/cluster/assemble.js";
import { TopBlocked } from "./shard/top/top-blocked.js";
import type { Cluster } from "./shard/cluster/cluster.js";
import { readPeerTls } from "./shard/cluster/peer-tls.js";
import { Directory } from "./shard/cluster/membership/directory.js";
import { defaultAdvertiseUrl } from "./shard/cluster/membership/self-address.js";
import { LocalDecider } from "./shard/local/local-decider.js";
import { FineStore } from "./shard/local/fine-store.js";
import { StateTable } from "./shard/table/state-table.js";
import { memoryBudget } from "./shard/table/memory-budget.js";
import { ChargeIds } from "./shard/local/charge-ids.js";
import { DurabilityMetrics } from "./metrics/durability-metrics.js";
import { Snapshotter } from "./shard/records/snapshotter.js";
import { clusterKey } from "./peer/link/cluster-secret.js";
import { LeaseTokens } from "./leases/lease-token.js";
import type { Policy } from "./policy/types.js";
import { loadPolicy, NO_POLICY_VERSION, PolicyWatcher } from "./policy/index.js";
import { PolicyMetrics } from "./metrics/policy-metrics.js";
import { XdsPolicy, xdsClientOptionsOf } from "./policy/xds/index.js";
import { RlsMetrics } from "./rls/rls-metrics.js";
import { RlsService } from "./rls/rls-service.js";
import { version } from "./cli.js";
import { PROTOCOL_MIN } from "./peer/index.js";
import { WorkerPool } from "./workers/worker-pool.js";
import { createGrpcDoor, grpcOptionsOf, reserveGrpcPort, rlsServiceOptionsOf } from "./workers/grpc-door.js";
import { randomBytes } from "node:crypto";

const SWEEP_INTERVAL_MS = 1000;

export interface RunningNode {
  readonly port: number;
  readonly metricsPort: number | undefined;
  /** the peer listener's port, when clustered */
  readonly peerPort: number | undefined;
  /** the gRPC port (Envoy's rate limit service), when GRPC_PORT is set */
  readonly grpcPort: number | undefined;
  readonly cluster: Cluster | undefined;
  readonly logger: Logger;
  readonly table: StateTable;
  readonly snapshotter: Snapshotter | undefined;
  /** the worker threads of WORKERS > 1 (docs/architecture.md, Threads) */
  readonly workers: WorkerPool | undefined;
  /** Graceful stop: /ready → 503, in-flight requests finish (bounded by drainTimeoutMs), listeners close. */
  stop(): Promise<void>;
}

export interface NodeOptions {
  /** the policy in force (docs/policy.md); none: every RLS descriptor matches no rule */
  policy?: () => Policy | undefined;
}

/** Wire one node together from its configuration and start serving. */
export async function startNode(
  config: Config,
  logger: Logger = createLogger(config.logLevel, config.nodeId),
  options: NodeOptions = {},
): Promise<RunningNode> {
  const clustered = config.peers.length > 0 || config.peersDns !== undefined;
  const replicated = clustered && config.replicas > 1;
  // One byte budget for every store of limit states, shared as memory-budget.ts says.
  const budget = memoryBudget(config.maxMemoryMb, { clustered, replicas: config.replicas });
  const table = new StateTable(config.maxKeys, Date.now(), budget.ownedBytes);
  // Copies of other owners' states (docs/durability.md): bounded in keys like the owned table, in bytes by its share.
  const replicaTable = replicated ? new StateTable(config.maxKeys, Date.now(), budget.replicaBytes, { resettable: false }) : undefined;
  // Their concurrency leases' fine lapses (REPLICATE_FINE), read when a replica is promoted.
  const replicaFine = replicated ? new FineStore(budget.replicaFineLapsesBytes) : undefined;
  const local = new LocalDecider(table, budget.releasedLeasesBytes, new ChargeIds(budget.chargeIdsBytes, config.chargeIdMemoryMs), budget.fineLapsesBytes);
  // One coarse sweep for expired states and for batch reservations nobody confirmed.
  const sweep = setInterval(() => {
    const now = Date.now();
    table.sweep(now);
    replicaTable?.sweep(now);
    local.reservations.sweep(now);
    local.released.sweep(now);
    local.fineLapses.sweep(now);
    replicaFine?.sweep(now);
    local.chargeIds.sweep(now);
  }, SWEEP_INTERVAL_MS);
  sweep.unref();

  let apiKeys = config.apiKeys;
  if (apiKeys.length === 0 && config.apiKeyHashes.length === 0) {
    // docs/api.md, Authentication: a first run works without configuration; the key is shown this once.
    const generated = generateApiKey();
    apiKeys = [generated.key];
    logger.warn({ generatedApiKey: generated.key, sha256: generated.sha256 }, "no API_KEYS or API_KEY_HASHES configured: generated an API key for this run");
  }
  const verifier = new ApiKeyVerifier(apiKeys, config.apiKeyHashes);
  const topBlocked = new TopBlocked(budget.topBlockedBytes, Date.now());
  const metrics = new Metrics(
    {
      storedKeys: () => table.size,
      storedBytes: (): number =>
        table.bytes +
        (replicaTable?.bytes ?? 0) +
        (cluster?.blockedCache.bytes ?? 0) +
        topBlocked.bytes +
        local.released.bytes +
        local.fineLapses.bytes +
        (replicaFine?.bytes ?? 0) +
        local.chargeIds.bytes,
      topBlocked,
      maxStoredBytes: budget.totalBytes,
      maxKeys: config.maxKeys,
      maxNamespaces: config.metricsMaxNamespaces,
      evictions: () => table.evictions,
      expirations: () => table.expirations,
      // frontEnd is made below; the gauge is read only when /metrics is scraped
      requestsInFlight: (): number => frontEnd.inFlight,
    },
    config.metricsCacheMs,
  );
  // POLICY_PATH (docs/policy.md): loaded once here (config checked it already), then kept in
  // step with its files (the watcher starts once the cluster is built); a reload swaps the
  // policy in one assignment.
  let policyWatcher: PolicyWatcher | undefined;
  // WORKERS > 1: made once the cluster is; a policy that changes before is read at its start.
  let pool: WorkerPool | undefined;
  let xds: XdsPolicy | undefined;
  let policy = options.policy;
  const onPolicyChange = (next: Policy) => {
    // The owner decides with the new policy from its next decision; the cluster forgets
    // blocks that may not stand under it and logs the members that now differ.
    local.setPolicy(next, config.shadowMode);
    cluster?.policyChanged();
    pool?.policyChanged();
    logger.info({ version: next.version }, "policy reloaded");
  };
  if (policy === undefined && config.policyPath !== undefined) {
    const watcher = new PolicyWatcher({
      path: config.policyPath,
      initial: loadPolicy(config.policyPath),
      onChange: onPolicyChange,
      logger,
      metrics: new PolicyMetrics(metrics.registry, config.usePrometheus),
    });
    policyWatcher = watcher;
    policy = () => watcher.policy;
  } else if (policy === undefined && config.configType === "GRPC_XDS_SOTW") {
    // The policy over xDS (docs/envoy-gateway.md): one more source of the same Policy.
    const source = new XdsPolicy({
      ...xdsClientOptionsOf(config),
      onChange: onPolicyChange,
      logger,
      metrics: new PolicyMetrics(metrics.registry, config.usePrometheus),
    });
    xds = source;
    policy = () => source.policy;
  }
  const policyVersion = (): string => policy?.()?.version ?? NO_POLICY_VERSION;
  // POST /limit's overrides and SHADOW_MODE are applied by each key's owner (docs/policy.md),
  // from before the peer listener takes forwarded decisions.
  local.setPolicy(policy?.(), config.shadowMode);
  const cluster = clustered
    ? assembleCluster(config, {
        local,
        metrics,
        logger,
        tls: readPeerTls(config),
        replicaTable,
        replicaFine,
        blockedCacheBytes: budget.blockedCacheBytes,
        sharesBytes: budget.sharesBytes,
        policyVersion,
        topBlocked,
      })
    : undefined;
  const decider: Decider = cluster?.decider ?? local;
  // Derived once (scrypt): the snapshot MAC's root and the concurrency leases' (any member verifies a lease).
  const rootKey = config.clusterSecret === undefined ? undefined : clusterKey(config.clusterSecret);
  const durability = new DurabilityMetrics(metrics.registry, config.stateDir === undefined ? 0 : config.snapshotIntervalMs / 1000);
  const snapshotter =
    config.stateDir === undefined
      ? undefined
      : new Snapshotter({
          dir: config.stateDir,
          intervalMs: config.snapshotIntervalMs,
          clusterKey: rootKey,
          nodeId: () => cluster?.self ?? config.nodeId ?? "standalone",
          owned: table,
          ...(replicaTable !== undefined ? { replicas: replicaTable } : {}),
          logger,
          metrics: durability,
          fineLapses: local.fineLapses,
        });
  // Loaded before the first answer: a restarted node goes on counting where it stopped.
  // States it does not own go to their owners once the ring forms (the join hand-off).
  await snapshotter?.restore(Date.now());
  snapshotter?.start();
  const peerPort = await cluster?.start().catch((err: NodeJS.ErrnoException) => {
    throw new ConfigError("PEER_PORT", `cannot listen on ${config.peerHost}:${config.peerPort}: ${describeListenError(err.code ?? "UNKNOWN")}`);
  });
  // A single node is a ring of one; a cluster's directory follows its ring.
  const directory = cluster?.directory ?? new Directory(config.nodeId ?? "", "", () => policyVersion());
  directory.software = () => ({
    build: version(),
    protocol: cluster?.protocol ?? { min: PROTOCOL_MIN, max: config.peerProtocolMax, ring: config.peerProtocolMax },
  });

  policyWatcher?.start();
  xds?.start();
  if (xds !== undefined && !config.forceStartWithoutInitialConfig) {
    // As envoyproxy/ratelimit: no answer before the first configuration, unless told to start without one.
    logger.info({ server: config.xdsServerUrl }, "waiting for the first configuration over xDS (FORCE_START_WITHOUT_INITIAL_CONFIG=true starts without)");
    await xds.firstConfig();
  }
  if (config.configType !== undefined && cluster === undefined) {
    logger.warn(
      "this node counts alone (no PEERS or PEERS_DNS): several replicas behind one Service each allow the whole limit; docs/envoy-gateway.md shows how they find each other",
    );
  }
  // Envoy's rate limit service: one more front door on the same decider (docs/envoy.md).
  const rls = new RlsService(rlsServiceOptionsOf(config), {
    decider,
    policy: policy ?? (() => undefined),
    metrics: new RlsMetrics(metrics.registry, config.usePrometheus),
    countDegraded: (r) => metrics.countDegraded(r),
  });
  const grpcDeps = { service: rls, verifier, isReady: () => cluster?.ready ?? true, logger };
  // WORKERS > 1: the workers serve the gRPC port (workers/grpc-door.ts); this thread only checks
  // that no socket holds it, and picks the port for GRPC_PORT=0. Bound before the HTTP port,
  // so a node that answers /ready already serves gRPC.
  const grpcInWorkers = config.workers > 1 && config.grpcPort !== undefined;
  const grpc = config.grpcPort === undefined || grpcInWorkers ? undefined : createGrpcDoor(config, grpcOptionsOf(config), grpcDeps);
  const grpcPort = await (grpcInWorkers ? reserveGrpcPort(config.host, config.grpcPort!) : grpc?.listen())?.catch((err: Error) => {
    throw new ConfigError("GRPC_PORT", `cannot listen on ${config.host}:${config.grpcPort}: ${err.message}`);
  });
  // GET /top: this node's summary alone, or merged across the ring.
  const policyLoaded = (): boolean => !config.healthyWithAtLeastOneConfigLoaded || (xds?.hasConfig ?? true);
  const top = (q: TopQuery): Promise<TopResult> =>
    cluster !== undefined ? cluster.top(q) : Promise.resolve({ entries: topBlocked.top(q.n, admitsOf(q)), members: 1, answered: 1 });
  // WORKERS > 1: the HTTP door runs in worker threads (docs/architecture.md, Threads); this
  // thread's front end only accepts connections and hands them over, and keeps the admin port.
  // Every thread mints and checks concurrency leases with one key.
  const leaseRoot = rootKey ?? (config.workers > 1 ? randomBytes(32) : undefined);
  const frontEnd = new FrontEnd(frontEndOptionsOf(config), {
    ...{ decider, verifier, ids: new IdGenerator(), metrics, logger, isReady: () => cluster?.ready ?? true, directory, rls, top },
    notReadyReason: () => cluster?.notReadyReason,
    leases: new LeaseTokens(leaseRoot),
    policyLoaded,
  });
  if (config.workers > 1) {
    pool = new WorkerPool({
      ...{ config, apiKeys, leaseRoot: leaseRoot!, decider, acceptor: frontEnd, metrics, topBlocked, top, directory, logger, policyLoaded, rls, grpcPort },
      policy: policy ?? (() => undefined),
      isReady: () => cluster?.ready ?? true,
      notReadyReason: () => cluster?.notReadyReason,
    });
    await pool.start();
    const workers = pool;
    metrics.renderFrom(() => workers.renderMetrics());
  }
  const { port, metricsPort } = await frontEnd.listen().catch(async (err: unknown) => {
    await grpc?.close(0);
    await pool?.stop();
    if (err instanceof ListenError) throw new ConfigError(err.listener === "metrics" ? "METRICS_PORT" : "PORT", err.message);
    throw err;
  });
  const tls = config.tlsCertFile !== undefined;
  const advertiseUrl =
    config.advertiseUrl ?? defaultAdvertiseUrl({ tls, host: config.host, port, ...(cluster !== undefined ? { ringName: cluster.self } : {}) });
  if (cluster !== undefined) cluster.advertise(advertiseUrl, logger);
  else {
    const name = config.nodeId ?? advertiseUrl;
    directory.selfUrl = advertiseUrl;
    directory.setRing([name], name);
  }
  // The workers answer GET /cluster and the ring-version header from the view as set just now.
  pool?.push();
  logger.info(
    {
      port,
      metricsPort,
      peerPort,
      grpcPort,
      self: cluster?.self,
      advertiseUrl,
      https: tls,
      maxKeys: config.maxKeys,
      memoryBudgetBytes: budget,
      uws: uwsBuild, // which of the two uWebSockets.js builds this host loaded (docs/node-versions.md)
    },
    "ringlimit node listening",
  );

  let stopping: Promise<void> | undefined;
  return {
    port,
    metricsPort,
    peerPort,
    grpcPort,
    cluster,
    logger,
    table,
    snapshotter,
    workers: pool,
    stop() {
      stopping ??= (async () => {
        frontEnd.startDraining();
        pool?.startDraining();
        grpc?.startDraining();
        frontEnd.stopListening();
        const deadline = Date.now() + config.drainTimeoutMs;
        if (cluster !== undefined) {
          const report = await cluster.leave(deadline);
          const log = report.failed > 0 ? logger.warn.bind(logger) : logger.info.bind(logger);
          log(
            { handedOver: report.sent, notHandedOver: report.failed, ms: report.ms },
            report.failed > 0 ? "left the ring; some keys could not be handed over" : "left the ring; every key handed over",
          );
        }
        // Each worker finishes its own requests in flight and closes its connections.
        const inWorkers = (await pool?.drain(deadline)) ?? 0;
        const inFlight = () => inWorkers + frontEnd.inFlight + (grpc?.inFlight ?? 0);
        while (inFlight() > 0 && Date.now() < deadline) await sleep(5);
        if (inFlight() > 0) logger.warn({ inFlight: inFlight() }, "drain timeout: closing with requests in flight");
        clearInterval(sweep);
        policyWatcher?.stop();
        xds?.stop();
        frontEnd.close();
        await pool?.stop();
        await grpc?.close(Math.max(0, deadline - Date.now()));
        await cluster?.stop();
        // Whatever no member took (a single node, the last node, a whole-cluster stop) is
        // kept for the next start; after a full hand-off this writes an empty snapshot, so
        // states now owned elsewhere cannot come back from an older file.
        await snapshotter?.stop();
        logger.info("ringlimit node stopped");
      })();
      return stopping;
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

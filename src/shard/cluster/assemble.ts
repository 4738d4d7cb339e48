import type { Config } from "../../config.js";
import type { Logger } from "../../logger.js";
import { ClusterMetrics } from "../../metrics/cluster-metrics.js";
import type { Metrics } from "../../metrics/metrics.js";
import { ReplicationMetrics } from "../../metrics/replication-metrics.js";
import { PeerServer } from "../../peer/index.js";
import type { LocalDecider } from "../local/local-decider.js";
import type { StateTable } from "../table/state-table.js";
import { Cluster } from "./cluster.js";
import { Directory } from "./membership/directory.js";
import { MemberPool } from "./membership/member-pool.js";
import { PolicyVersions } from "./membership/policy-versions.js";
import { answerTop, topAcrossRing } from "./top-offenders.js";
import type { TopRequest } from "./wire/top-wire.js";
import { policyMismatchGauge } from "../../metrics/policy-metrics.js";
import { DnsMembership, StaticMembership } from "./membership/member-sources.js";
import { splitHostPort } from "./membership/self-address.js";
import { Coordinator } from "./movement/coordinator.js";
import { Replicator } from "./movement/replicator.js";
import type { PeerTls } from "./peer-tls.js";
import { BatchForwarder, batchHoldMs } from "./routing/batch-forwarding.js";
import { BlockedCache } from "./routing/blocked-cache.js";
import { ResetNotices } from "./routing/reset-notices.js";
import { ClusterDecider } from "./routing/forwarding.js";
import { InboundHandler } from "./routing/inbound.js";
import { LiveView } from "./view.js";
import { KnownMembers } from "./leases/known-members.js";
import { ShareTable } from "./leases/share-table.js";
import { Shares } from "./leases/shares.js";

/** What the node gives the cluster: its table's decider, its registry and log, and its share of memory. */
export interface ClusterParts {
  local: LocalDecider;
  metrics: Metrics;
  logger: Logger;
  tls: PeerTls;
  /** where states of other owners are kept; given when REPLICAS > 1 */
  replicaTable: StateTable | undefined;
  /** the blocked cache's share of the memory budget (memory-budget.ts) */
  blockedCacheBytes: number;
  /** the bytes of this member's shares of other owners' keys (memory-budget.ts) */
  sharesBytes: number;
  /** the version of the policy this node holds now (docs/policy.md): told with every heartbeat */
  policyVersion: () => string;
}

/**
 * The cluster's part of the composition root (node.ts calls it): builds the member pool (peer
 * clients and the ring), the coordinator (join, leave, reconcile), the replicator, the
 * inbound handler behind the peer listener and the decider the front end asks, and wires
 * their events to each other. Nothing is started here (Cluster.start).
 */
export function assembleCluster(
  config: Config,
  { local, metrics, logger, tls, replicaTable, blockedCacheBytes, sharesBytes, policyVersion }: ClusterParts,
): Cluster {
  const table = local.table;
  // The pool calls back into parts made after it; none of its callbacks runs before start().
  let coordinator: Coordinator | undefined;
  // The owner holds back a share for each other member it has known (leases/, share-rule.ts).
  const known = new KnownMembers((count) => {
    local.sharers = count - 1;
  });
  let replicator: Replicator | undefined;
  const pool: MemberPool = new MemberPool({
    self: config.nodeId ?? `${config.peerHost}:${config.peerPort}`,
    peerHost: config.peerHost,
    peerPort: config.peerPort,
    nodeId: config.nodeId,
    secret: config.clusterSecret!,
    peerTimeoutMs: config.peerTimeoutMs,
    heartbeatIntervalMs: config.heartbeatIntervalMs,
    failureTimeoutMs: config.failureTimeoutMs,
    takeoverHoldMs: config.takeoverHoldMs,
    zone: config.zone ?? "",
    maxClockSkewMs: config.maxClockSkewMs,
    clientTls: tls.client,
    logger,
    onRingChanged: (joined) => {
      known.note(pool.ring.members, pool.self, pool.configuredCount);
      coordinator!.onRingChanged(joined);
      directory.setRing(pool.ring.members, pool.self);
      for (const member of joined) if (member !== pool.self) directory.exchangeWith(member, pool.client(member), logger);
      replicator?.onRingChanged();
    },
    onSettled: () => coordinator!.onSettled(),
    onPeerPolicyVersion: (member, version) => policyVersions.note(member, version),
  });
  const policyVersions = new PolicyVersions(policyVersion, logger);
  policyMismatchGauge(metrics.registry, () => policyVersions.mismatches(pool.ring.members, pool.self));
  const directory = new Directory(pool.self, "", (member) => policyVersions.versionOf(member, pool.self));
  coordinator = new Coordinator(pool, table, logger);
  const view = new LiveView(pool, coordinator, table);
  if (config.replicas > 1 && replicaTable !== undefined) {
    replicator = new Replicator({
      replicas: config.replicas,
      delayMs: config.replicationDelayMs,
      pool,
      owned: table,
      replicaTable,
      logger,
      metrics: new ReplicationMetrics(
        metrics.registry,
        () => replicaTable.size,
        () => replicator?.backlog() ?? 0,
      ),
    });
  }
  let server: PeerServer | undefined;
  const clusterMetrics = new ClusterMetrics(metrics.registry, {
    members: () => pool.ring.size,
    configured: () => pool.configuredCount,
    quorum: () => pool.quorum,
    clockOffsets: () => pool.clockOffsets(),
    peerStates: () => pool.peerStates(),
    lateAllowed: () => pool.lateAllowed(),
    expiredForwards: () => server?.stats.decideExpired ?? 0,
    sharesGranted: () => shares.granted,
    sharesReturned: () => shares.returned,
  });
  const blockedCache = new BlockedCache(blockedCacheBytes);
  const shares = new Shares(new ShareTable(sharesBytes), known, (q) => local.mayChange(q), view, config.peerTimeoutMs);
  const notices = new ResetNotices(view, blockedCache, config.peerTimeoutMs);
  // A refund may unblock a key that other members remember as blocked: they forget it, as for a reset.
  local.refunded = (ringKey) => void notices.announce(ringKey);
  const decider = new ClusterDecider(
    view,
    local,
    blockedCache,
    clusterMetrics,
    new BatchForwarder(view, local, config.peerTimeoutMs, batchHoldMs(config.peerTimeoutMs), (ringKey) => notices.announce(ringKey), blockedCache),
    config.peerTimeoutMs,
    shares,
  );
  const moving = coordinator;
  const inbound = new InboundHandler(view, local, {
    strayState: () => moving.noteStrayState(),
    memberLeaving: (member, from) => {
      logger.info({ member, from }, "member is leaving: drops out of the ring");
      pool.markDeparted(member);
    },
    handoffDone: (from) => moving.onHandoffDone(from),
    advertise: (payload, from) => directory.answerAdvertise(payload, from),
    top: (payload) => answerTop(payload, metrics.topBlocked),
    statesRefused: (from, count) => logger.warn({ from, count }, "handed-over states out of bounds: not merged"),
    // A member (re)started and reached us: reach it now rather than after our backoff,
    // so it joins every ring and receives its states within milliseconds.
    peerAuthenticated: (member) => {
      // Counted before the member's connection is up on its side, so before it may take a share.
      known.note([member], pool.self, pool.configuredCount);
      pool.reconnectNow(member);
    },
    resetApplied: (ringKey) => notices.announce(ringKey),
    resetNotice: (payload) => shares.forgetGrants(notices.received(payload)),
    replicate: (payload, from) => {
      if (replicator === undefined) throw new Error("REPLICAS=1 here: not keeping replicas");
      return replicator.receive(payload, from, Date.now());
    },
  });
  server = new PeerServer({
    host: config.peerHost,
    port: config.peerPort,
    secret: config.clusterSecret!,
    nodeId: pool.self,
    heartbeatIntervalMs: config.heartbeatIntervalMs,
    logger,
    ...(tls.server !== undefined ? { tls: tls.server } : {}),
    handler: inbound,
    pongTag: policyVersion,
    zone: config.zone ?? "",
    onDecideFrame: (items) => clusterMetrics.observeDecideFrame(items),
  });
  const dns = config.peersDns !== undefined ? splitHostPort(config.peersDns) : undefined;
  const membership =
    dns !== undefined ? new DnsMembership(dns.host, dns.port, config.dnsIntervalMs, logger, config.dnsServer) : new StaticMembership(config.peers);
  const top = (q: TopRequest) => topAcrossRing(q, metrics.topBlocked, pool.ring.members, pool.self, (m) => pool.client(m), config.peerTimeoutMs);
  return new Cluster({ pool, coordinator, directory, replicator, blockedCache, decider, shares, server, membership, policyVersions, top });
}

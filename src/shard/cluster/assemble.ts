import type { Config } from "../../config.js";
import type { Logger } from "../../logger.js";
import { ClusterMetrics } from "../../metrics/cluster-metrics.js";
import type { Metrics } from "../../metrics/metrics.js";
import { ReplicationMetrics } from "../../metrics/replication-metrics.js";
import { ownRange, PeerServer } from "../../peer/index.js";
import type { LocalDecider } from "../local/local-decider.js";
import type { StateTable } from "../table/state-table.js";
import type { FineStore } from "../local/fine-store.js";
import { Cluster } from "./cluster.js";
import { Directory } from "./membership/directory.js";
import { MemberPool } from "./membership/member-pool.js";
import { PolicyVersions } from "./membership/policy-versions.js";
import { answerTop, topAcrossRing } from "./top-offenders.js";
import type { TopRequest } from "./wire/top-wire.js";
import type { TopBlocked } from "../top/top-blocked.js";
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
import { Holders } from "./leases/holders.js";
import { SHARE_MARGIN_MS } from "./leases/shares.js";
import { encodeHoldReply } from "./wire/lease-wire.js";
import { ShareTable } from "./leases/share-table.js";
import { Shares } from "./leases/shares.js";
import { announceDebt, receiveDebtNotice } from "./leases/debt-notices.js";

/** What the node gives the cluster: its table's decider, its registry and log, and its share of memory. */
export interface ClusterParts {
  local: LocalDecider;
  metrics: Metrics;
  logger: Logger;
  tls: PeerTls;
  /** where states of other owners are kept; given when REPLICAS > 1 */
  replicaTable: StateTable | undefined;
  /** the fine lapses of those states' concurrency leases, as their owners sent them; given with replicaTable */
  replicaFine: FineStore | undefined;
  /** the blocked cache's share of the memory budget (memory-budget.ts) */
  blockedCacheBytes: number;
  /** the bytes of this member's shares of other owners' keys (memory-budget.ts) */
  sharesBytes: number;
  /** the version of the policy this node holds now (docs/policy.md): told with every heartbeat */
  policyVersion: () => string;
  /** the identifiers this node blocked most (GET /top): answered to peers, merged across the ring */
  topBlocked: TopBlocked;
}

/**
 * The cluster's part of the composition root (node.ts calls it): builds the member pool (peer
 * clients and the ring), the coordinator (join, leave, reconcile), the replicator, the
 * inbound handler behind the peer listener and the decider the front end asks, and wires
 * their events to each other. Nothing is started here (Cluster.start).
 */
export function assembleCluster(
  config: Config,
  { local, metrics, logger, tls, replicaTable, replicaFine, blockedCacheBytes, sharesBytes, policyVersion, topBlocked }: ClusterParts,
): Cluster {
  const table = local.table;
  const protocol = ownRange(config.peerProtocolMax);
  // The pool calls back into parts made after it; none of its callbacks runs before start().
  let coordinator: Coordinator | undefined;
  // The owner holds back a share for each member that asked and may still answer one (leases/holders.ts).
  const holders = new Holders(config.failureTimeoutMs + SHARE_MARGIN_MS);
  local.sharers = holders;
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
    protocol,
    staticMembers: config.peersDns === undefined,
    logger,
    onRingChanged: (joined) => {
      // Before any decision on the new ring: what this node answered by rule of keys it now owns.
      shares.foldOwned(table, (ringKey) => pool.ring.owner(ringKey) === pool.self, Date.now());
      coordinator!.onRingChanged(joined);
      directory.setRing(pool.ring.members, pool.self);
      for (const member of joined) if (member !== pool.self) directory.exchangeWith(member, pool.client(member), logger);
      replicator?.onRingChanged();
    },
    onSettled: () => coordinator!.onSettled(),
    onPeerPolicyVersion: (member, version) => policyVersions.note(member, version),
  });
  const policyVersions = new PolicyVersions(policyVersion, logger);
  // A ring with a member of protocol 11 (which never asks HOLD and answers shares by rule
  // anyway) gets today's rule back: the owner holds back for every connected member.
  const gateHolds = (): void => holders.holdEveryone(!pool.protocol.supports("HOLD"), Date.now());
  pool.protocol.onVersion = gateHolds;
  gateHolds();
  policyMismatchGauge(metrics.registry, () => policyVersions.mismatches(pool.ring.members, pool.self));
  const directory = new Directory(pool.self, "", (member) => policyVersions.versionOf(member, pool.self));
  coordinator = new Coordinator(pool, table, logger, local.fineLapses);
  const view = new LiveView(pool, coordinator, table);
  if (config.replicas > 1 && replicaTable !== undefined) {
    replicator = new Replicator({
      replicas: config.replicas,
      delayMs: config.replicationDelayMs,
      pool,
      owned: table,
      replicaTable,
      ownedFine: local.fineLapses,
      ...(replicaFine !== undefined ? { replicaFine } : {}),
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
    // Members that left gracefully (SIGTERM: LEAVE) are not counted: a planned scale-in leaves
    // ring == configured, so `ring < configured` alerts only on members that went missing.
    configured: () => pool.voters,
    quorum: () => pool.quorum,
    clockOffsets: () => pool.clockOffsets(),
    peerStates: () => pool.peerStates(),
    lateAllowed: () => pool.lateAllowed(),
    expiredForwards: () => server?.stats.decideExpired ?? 0,
    decideReads: () => server?.stats.decideReads ?? 0,
    sharesGranted: () => shares.granted,
    sharesReturned: () => shares.returned,
  });
  // One memory of resets on the node: the table's (bounded, counted in MAX_MEMORY_MB).
  const blockedCache = new BlockedCache(blockedCacheBytes, table.resets);
  const shares = new Shares(
    new ShareTable(sharesBytes),
    table.resets,
    (q) => local.mayChange(q),
    (owner) => policyVersions.versionOf(owner, pool.self) === policyVersion(),
    view,
    config.peerTimeoutMs,
    config.failureTimeoutMs,
  );
  const notices = new ResetNotices(view, blockedCache, config.peerTimeoutMs);
  // A refund may unblock a key that other members remember as blocked: they forget it, as for a reset.
  local.refunded = (ringKey) => void notices.announce(ringKey);
  // A charge past the limit of a key members answer from their shares: they stop (docs/shares.md, Debt).
  local.indebted = (stateKey, windowStart) => announceDebt(view, stateKey, windowStart, config.peerTimeoutMs);
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
    top: (payload) => answerTop(payload, topBlocked),
    statesRefused: (from, count) => logger.warn({ from, count }, "handed-over states out of bounds: not merged"),
    // A member (re)started and reached us: reach it now rather than after our backoff,
    // so it joins every ring and receives its states within milliseconds.
    peerAuthenticated: (member) => {
      holders.opened(member);
      pool.reconnectNow(member);
    },
    peerClosed: (member) => holders.closed(member, Date.now()),
    hold: (member) => encodeHoldReply(holders.admit(member, pool.ring.size, Date.now()), holders.size),
    resetApplied: (ringKey) => notices.announce(ringKey),
    resetNotice: (payload) => shares.forgetGrants(notices.received(payload)),
    debtNotice: (payload, from) => receiveDebtNotice(shares, payload, from),
    replicate: (payload, from, fine) => {
      if (replicator === undefined) throw new Error("REPLICAS=1 here: not keeping replicas");
      return replicator.receive(payload, from, Date.now(), fine);
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
    protocol,
    membersTag: (asked) => pool.lists.replyTo(asked),
  });
  const dns = config.peersDns !== undefined ? splitHostPort(config.peersDns) : undefined;
  const membership =
    dns !== undefined ? new DnsMembership(dns.host, dns.port, config.dnsIntervalMs, logger, config.dnsServer) : new StaticMembership(config.peers);
  const top = (q: TopRequest) => topAcrossRing(q, topBlocked, pool.ring.members, pool.self, (m) => pool.client(m), config.peerTimeoutMs);
  return new Cluster({ pool, coordinator, directory, replicator, blockedCache, decider, shares, server, membership, policyVersions, top });
}

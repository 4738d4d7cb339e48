import type { Config } from "../../config.js";
import type { Logger } from "../../logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import { ClusterMetrics } from "../../metrics/cluster-metrics.js";
import { PeerServer, type PeerClient } from "../../peer/index.js";
import type { LocalDecider } from "../local/local-decider.js";
import { stateKeyOf } from "../ring/state-key.js";
import type { StateTable } from "../table/state-table.js";
import { BlockedCache } from "./routing/blocked-cache.js";
import { Coordinator } from "./movement/coordinator.js";
import { Directory } from "./membership/directory.js";
import { BatchForwarder, batchHoldMs } from "./routing/batch-forwarding.js";
import { ClusterDecider, type ClusterView } from "./routing/forwarding.js";
import type { HandOffReport } from "./movement/handoff-sender.js";
import { InboundHandler } from "./routing/inbound.js";
import { MemberPool } from "./membership/member-pool.js";
import { MIN_MEMBERS_FOR_QUORUM } from "./membership/quorum.js";
import { ReplicationMetrics } from "../../metrics/replication-metrics.js";
import { Replicator } from "./movement/replicator.js";
import { DnsMembership, StaticMembership, type MembershipSource } from "./membership/member-sources.js";
import type { PeerTls } from "./peer-tls.js";
import type { HashRing } from "../ring/ring.js";
import { splitHostPort } from "./membership/self-address.js";

/**
 * This node's place in the cluster, wired together: the member pool (peer clients and the
 * ring), the coordinator (join, leave, reconcile), the inbound handler behind the peer
 * listener, and the decider the front end asks. Cluster itself only starts and stops them
 * and answers the view the ownership rule reads.
 */
export class Cluster implements ClusterView {
  readonly decider: ClusterDecider;
  /** members and their client-facing URLs, for GET /cluster */
  readonly directory: Directory;
  private readonly pool: MemberPool;
  private readonly coordinator: Coordinator;
  private readonly server: PeerServer;
  private readonly membership: MembershipSource;
  private readonly table: StateTable;
  /** REPLICAS > 1: keeps copies of this node's states on its successors, and takes over theirs */
  readonly replicator: Replicator | undefined;
  /** a forwarding node's memory of owners' 429s, bounded in bytes */
  readonly blockedCache: BlockedCache;
  private stopped = false;

  /**
   * `replicaTable`: where states of other owners are kept; given when REPLICAS > 1.
   * `blockedCacheBytes`: the blocked cache's share of the memory budget (memory-budget.ts).
   */
  constructor(
    config: Config,
    local: LocalDecider,
    metrics: Metrics,
    logger: Logger,
    tls: PeerTls,
    { replicaTable, blockedCacheBytes }: { replicaTable: StateTable | undefined; blockedCacheBytes: number },
  ) {
    this.table = local.table;
    const peerPort = config.peerPort!;
    this.pool = new MemberPool({
      self: config.nodeId ?? `${config.peerHost}:${peerPort}`,
      peerHost: config.peerHost,
      peerPort,
      nodeId: config.nodeId,
      secret: config.clusterSecret!,
      peerTimeoutMs: config.peerTimeoutMs,
      heartbeatIntervalMs: config.heartbeatIntervalMs,
      failureTimeoutMs: config.failureTimeoutMs,
      maxClockSkewMs: config.maxClockSkewMs,
      clientTls: tls.client,
      logger,
      onRingChanged: (joined) => {
        this.coordinator.onRingChanged(joined);
        this.directory.setRing(this.pool.ring.members, this.pool.self);
        for (const member of joined) if (member !== this.pool.self) this.directory.exchangeWith(member, this.pool.client(member), logger);
        this.replicator?.onRingChanged();
      },
      onSettled: () => this.coordinator.onSettled(),
    });
    const pool = this.pool;
    this.directory = new Directory(pool.self, "");
    this.coordinator = new Coordinator(pool, this.table, logger);
    const replicas = config.replicas ?? 1;
    if (replicas > 1 && replicaTable !== undefined) {
      this.replicator = new Replicator({
        replicas,
        pool,
        owned: this.table,
        replicaTable,
        logger,
        metrics: new ReplicationMetrics(
          metrics.registry,
          () => replicaTable.size,
          () => this.replicator?.backlog() ?? 0,
        ),
      });
    }
    const replicator = this.replicator;
    const clusterMetrics = new ClusterMetrics(metrics.registry, {
      members: () => pool.ring.size,
      configured: () => pool.configuredCount,
      quorum: () => pool.quorum,
      clockOffsets: () => pool.clockOffsets(),
      peerStates: () => pool.peerStates(),
      lateAllowed: () => pool.lateAllowed(),
      expiredForwards: () => this.server.stats.decideExpired,
    });
    this.blockedCache = new BlockedCache(blockedCacheBytes);
    this.decider = new ClusterDecider(
      this,
      local,
      this.blockedCache,
      clusterMetrics,
      new BatchForwarder(this, local, config.peerTimeoutMs, batchHoldMs(config.peerTimeoutMs)),
    );
    const inbound = new InboundHandler(this, local, {
      strayState: () => this.coordinator.noteStrayState(),
      memberLeaving: (member, from) => {
        logger.info({ member, from }, "member is leaving: drops out of the ring");
        pool.markDeparted(member);
      },
      handoffDone: (from) => this.coordinator.onHandoffDone(from),
      advertise: (payload, from) => this.directory.answerAdvertise(payload, from),
      statesRefused: (from, count) => logger.warn({ from, count }, "handed-over states out of bounds: not merged"),
      // A member (re)started and reached us: reach it now rather than after our backoff,
      // so it joins every ring and receives its states within milliseconds.
      peerAuthenticated: (member) => pool.reconnectNow(member),
      replicate: (payload, from) => {
        if (replicator === undefined) throw new Error("REPLICAS=1 here: not keeping replicas");
        return replicator.receive(payload, from, Date.now());
      },
    });
    this.server = new PeerServer({
      host: config.peerHost,
      port: peerPort,
      secret: config.clusterSecret!,
      nodeId: pool.self,
      logger,
      ...(tls.server !== undefined ? { tls: tls.server } : {}),
      handler: inbound,
    });
    const dns = config.peersDns !== undefined ? splitHostPort(config.peersDns) : undefined;
    this.membership =
      dns !== undefined ? new DnsMembership(dns.host, dns.port, config.dnsIntervalMs, logger, config.dnsServer) : new StaticMembership(config.peers);
  }

  async start(): Promise<number> {
    const port = await this.server.listen();
    this.coordinator.start();
    this.replicator?.start();
    this.membership.start((members) => {
      this.pool.setMembers(members);
      // Peers dial this node by its name in the list, and the handshake binds that name.
      this.server.nodeId = this.pool.self;
    });
    return port;
  }

  /**
   * Ready once the ring is known and this node has joined: every configured member has been
   * reached or found down at least once (bounded by the failure timeout), so its first
   * answers come from the ring it will keep, not from a ring of one; and the states that
   * moved to it have arrived. And while it sees a majority of the members (from three on,
   * once it has seen one; see quorum.ts): a node cut off with a minority turns unready.
   */
  get ready(): boolean {
    const pool = this.pool;
    return (
      !this.stopped &&
      pool.configuredCount > 0 &&
      pool.settled &&
      !this.coordinator.joining &&
      (pool.quorum || !pool.hadQuorum || pool.voters < MIN_MEMBERS_FOR_QUORUM)
    );
  }

  // The view the ownership rule reads (see ownership.ts).
  get self(): string {
    return this.pool.self;
  }
  get ring(): HashRing {
    return this.pool.ring;
  }
  get frozen(): boolean {
    return this.coordinator.frozen;
  }
  get joining(): boolean {
    return this.coordinator.joining;
  }
  holds(algorithmCode: number, duration: number, ringKey: string): boolean {
    return this.table.get(stateKeyOf(algorithmCode, duration, ringKey)) !== undefined;
  }
  fencedUntil(member: string): number | undefined {
    return this.coordinator.fencedUntil(member);
  }
  isUp(member: string): boolean {
    return this.pool.isUp(member);
  }
  client(member: string): PeerClient | undefined {
    return this.pool.client(member);
  }
  noteForward(member: string, timedOut: boolean, now: number): void {
    this.pool.noteForward(member, timedOut, now);
  }

  /** Graceful leave: see Coordinator.leave. */
  async leave(deadline: number): Promise<HandOffReport> {
    const report = await this.coordinator.leave(deadline);
    this.directory.setRing(this.pool.ring.members, this.pool.self);
    return report;
  }

  /** Clients reach this node at `url` (GET /cluster); every member up learns it now, the others when they come up. */
  advertise(url: string, logger: Logger): void {
    this.directory.selfUrl = url;
    this.directory.setRing(this.pool.ring.members, this.pool.self);
    for (const member of this.pool.ring.members) if (member !== this.pool.self) this.directory.exchangeWith(member, this.pool.client(member), logger);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.coordinator.stop();
    this.replicator?.stop();
    this.membership.stop();
    this.pool.stop();
    await this.server.close();
  }
}

import type { Logger } from "../../logger.js";
import type { PeerServer } from "../../peer/index.js";
import type { Directory } from "./membership/directory.js";
import type { MemberPool } from "./membership/member-pool.js";
import type { MembershipSource } from "./membership/member-sources.js";
import type { PolicyVersions } from "./membership/policy-versions.js";
import type { TopAnswer } from "./top-offenders.js";
import type { TopRequest } from "./wire/top-wire.js";
import { MIN_MEMBERS_FOR_QUORUM } from "./membership/quorum.js";
import type { Coordinator } from "./movement/coordinator.js";
import type { HandOffReport } from "./movement/handoff-sender.js";
import type { Replicator } from "./movement/replicator.js";
import type { BlockedCache } from "./routing/blocked-cache.js";
import type { ClusterDecider } from "./routing/forwarding.js";
import type { Shares } from "./leases/shares.js";

/** The parts of a cluster, built and wired by assembleCluster (assemble.ts). */
export interface ClusterPartsBuilt {
  pool: MemberPool;
  coordinator: Coordinator;
  directory: Directory;
  replicator: Replicator | undefined;
  blockedCache: BlockedCache;
  decider: ClusterDecider;
  /** this member's shares of keys other members own: its sweep returns idle grants */
  shares: Shares;
  server: PeerServer;
  membership: MembershipSource;
  policyVersions: PolicyVersions;
  /** GET /top across the ring (top-offenders.ts) */
  top: (q: TopRequest) => Promise<TopAnswer>;
}

/**
 * This node's place in the cluster, once assembled (assemble.ts): Cluster starts and stops
 * its parts and says whether the node is ready. It builds nothing.
 */
export class Cluster {
  /** the front end's decider when clustered */
  readonly decider: ClusterDecider;
  /** members and their client-facing URLs, for GET /cluster */
  readonly directory: Directory;
  /** REPLICAS > 1: keeps copies of this node's states on its successors, and takes over theirs */
  readonly replicator: Replicator | undefined;
  /** a forwarding node's memory of owners' 429s, bounded in bytes */
  readonly blockedCache: BlockedCache;
  private readonly pool: MemberPool;
  private readonly shares: Shares;
  private readonly coordinator: Coordinator;
  private readonly server: PeerServer;
  private readonly membership: MembershipSource;
  private readonly policyVersions: PolicyVersions;
  /** GET /top: the identifiers blocked most, merged across the ring */
  readonly top: (q: TopRequest) => Promise<TopAnswer>;
  private stopped = false;

  constructor(parts: ClusterPartsBuilt) {
    this.pool = parts.pool;
    this.coordinator = parts.coordinator;
    this.directory = parts.directory;
    this.replicator = parts.replicator;
    this.blockedCache = parts.blockedCache;
    this.decider = parts.decider;
    this.shares = parts.shares;
    this.server = parts.server;
    this.membership = parts.membership;
    this.policyVersions = parts.policyVersions;
    this.top = parts.top;
  }

  /**
   * This node's policy changed (a reload): blocks remembered for forwarded keys may not stand
   * under it, and the members that now run another version are logged once.
   */
  policyChanged(): void {
    this.blockedCache.clear();
    this.policyVersions.ownChanged(this.pool.ring.members, this.pool.self);
  }

  async start(): Promise<number> {
    const port = await this.server.listen();
    this.coordinator.start();
    this.replicator?.start();
    this.shares.start();
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
   * moved to it have arrived. With a static PEERS list, once it has reached and authenticated
   * with a majority of the members (itself included; PEERS of itself alone, or no PEERS, is
   * ready at once). With any list, not while members refusing its handshake leave it without
   * a majority: a node whose CLUSTER_SECRET they refuse sees a ring of one and would count alone.
   * From three members on it stays ready only while it sees that majority (quorum.ts); with
   * two, a peer that vanishes after both met leaves the other ready (a crash and a partition
   * look alike), one that refuses its handshake does not.
   */
  get ready(): boolean {
    return this.notReadyReason === undefined;
  }

  /** Why /ready answers 503 (its body says it); undefined when ready. */
  get notReadyReason(): string | undefined {
    const pool = this.pool;
    if (this.stopped) return "stopping";
    if (pool.configuredCount === 0 || !pool.settled) return "starting: not every member in PEERS has been reached or found down yet";
    if (this.coordinator.joining) return "joining: the states that moved to this node have not all arrived";
    if (pool.quorum) return undefined;
    const seen = `sees ${pool.ring.size} of ${pool.voters} members`;
    // Counts, not names: /ready answers without auth, and the log names the members.
    const refused = pool.unauthenticated.size;
    if (refused > 0) {
      return `cannot authenticate with ${refused} of ${pool.configuredCount - 1} other members: the peer handshake's proof does not match (every member needs the same CLUSTER_SECRET); ${seen}, a majority is needed`;
    }
    if (pool.apart > 0)
      return `members given another PEERS list or speaking no shared protocol version are kept out of the ring; ${seen}, a majority is needed`;
    // With a static PEERS list only (lists.digest is set then): PEERS_DNS records may name pods
    // not started yet, and the first pod of a cluster started one at a time turns ready alone.
    if (!pool.hadQuorum) return pool.lists.digest !== "" ? `no quorum yet: ${seen}; ready once it has reached and authenticated with a majority` : undefined;
    if (pool.voters >= MIN_MEMBERS_FOR_QUORUM) return `no quorum: ${seen}, a majority is needed`;
    return undefined;
  }

  /** the peer protocol versions this node speaks, and the one its ring runs at (membership/ring-protocol.ts) */
  get protocol(): { min: number; max: number; ring: number } {
    const p = this.pool.protocol;
    return { min: p.own.min, max: p.own.max, ring: p.version };
  }

  /** this node's name on the ring */
  get self(): string {
    return this.pool.self;
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
    this.shares.stop();
    this.membership.stop();
    this.pool.stop();
    await this.server.close();
  }
}

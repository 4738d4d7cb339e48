import { readFileSync } from "node:fs";
import { algorithmByCode } from "../algorithms/index.js";
import type { Config } from "../config.js";
import type { LimitQuery } from "../limit-request.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import { DecideCode, PeerClient, PeerServer, type DecideResult, type PeerTlsOptions } from "../peer/index.js";
import { BlockedCache } from "./blocked-cache.js";
import { ClusterDecider, type ClusterView } from "./cluster-decider.js";
import { ClusterMetrics } from "./cluster-metrics.js";
import type { LocalDecider } from "./local-decider.js";
import { DnsMembership, StaticMembership, type MembershipSource } from "./membership.js";
import { HashRing } from "./ring.js";
import { findSelf, splitHostPort } from "./self-address.js";
import { ringKeyOf } from "./state-key.js";

/**
 * This node's place in the cluster: the peer listener that decides forwarded requests,
 * one persistent client per other member, and the ring of members believed alive.
 *
 * Failure detection is the clients' heartbeats: a member whose connection is refused or
 * lost, or that sends nothing for FAILURE_TIMEOUT_MS, leaves this node's ring (its keys
 * move to their next owner); when it answers again it comes back.
 */
export class Cluster implements ClusterView {
  self: string;
  ring: HashRing;
  readonly decider: ClusterDecider;
  private configured: readonly string[] = [];
  private readonly clients = new Map<string, PeerClient>();
  /** members whose first connection attempt has not settled yet (up or down) */
  private unsettled = new Set<string>();
  private readonly server: PeerServer;
  private readonly membership: MembershipSource;
  private readonly metrics: ClusterMetrics;
  private readonly startedAt = Date.now();
  private stopped = false;

  constructor(
    private readonly config: Config,
    local: LocalDecider,
    metrics: Metrics,
    private readonly logger: Logger,
  ) {
    const peerPort = config.peerPort!;
    this.self = config.nodeId ?? `${config.peerHost}:${peerPort}`;
    this.ring = new HashRing([this.self]);
    this.metrics = new ClusterMetrics(metrics.registry, {
      members: () => this.ring.size,
      configured: () => this.configured.length,
      peerStates: () => [...this.clients].map(([m, c]) => [m, c.state === "up"] as [string, boolean]),
    });
    this.decider = new ClusterDecider(this, local, new BlockedCache(), this.metrics);

    const query: LimitQuery = { namespace: "", identifier: "", limit: 1, duration: 1, algorithm: algorithmByCode(0)! };
    this.server = new PeerServer({
      host: config.peerHost,
      port: peerPort,
      secret: config.clusterSecret!,
      nodeId: this.self,
      logger,
      ...(this.serverTls() !== undefined ? { tls: this.serverTls()! } : {}),
      handler: {
        // A forwarded request is decided here whatever this node's ring says: never forwarded again.
        decide: (ns, identifier, algorithmCode, limit, duration, out: DecideResult) => {
          const algorithm = algorithmByCode(algorithmCode);
          if (algorithm === undefined || !(limit >= 1 && limit <= 1_000_000) || !(duration >= 1 && duration <= 31_536_000) || ns.length === 0 || identifier.length === 0) {
            throw new RangeError("forwarded decision out of contract");
          }
          query.namespace = ns;
          query.identifier = identifier;
          query.limit = limit;
          query.duration = duration;
          query.algorithm = algorithm;
          const d = local.decideNow(query, ringKeyOf(ns, identifier), Date.now());
          out.code = d.allowed ? DecideCode.ALLOWED : DecideCode.BLOCKED;
          out.remaining = d.remaining;
          out.resetTime = d.resetTime;
          out.retryAfterMs = d.retryAfterMs;
        },
      },
    });
    this.membership =
      config.peersDns !== undefined
        ? new DnsMembership(splitHostPort(config.peersDns).host, splitHostPort(config.peersDns).port, config.dnsIntervalMs, logger, config.dnsServer)
        : new StaticMembership(config.peers);
  }

  async start(): Promise<number> {
    const port = await this.server.listen();
    this.membership.start((members) => this.onMembers(members));
    return port;
  }

  /**
   * Ready once the ring is known: every configured member has been reached or found
   * down at least once (bounded by the failure timeout), so this node's first answers
   * come from the ring it will keep, not from a ring of one.
   */
  get ready(): boolean {
    if (this.stopped || this.configured.length === 0) return false;
    return this.unsettled.size === 0 || Date.now() - this.startedAt > this.config.failureTimeoutMs;
  }

  client(member: string): PeerClient | undefined {
    return this.clients.get(member);
  }

  get members(): readonly string[] {
    return this.configured;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.membership.stop();
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    await this.server.close();
  }

  private onMembers(members: readonly string[]): void {
    const self = findSelf(members, this.config.peerHost, this.config.peerPort!, this.config.nodeId);
    if (self !== undefined && self !== this.self) {
      this.logger.info({ self }, "found this node in the member list");
      this.self = self;
    } else if (self === undefined) {
      this.logger.warn({ self: this.self, members }, "this node is not in the member list; other nodes will not send it keys");
    }
    this.configured = [...new Set([...members, this.self])].sort();
    for (const member of this.configured) {
      if (member === this.self || this.clients.has(member)) continue;
      this.addClient(member);
    }
    for (const [member, client] of this.clients) {
      if (this.configured.includes(member)) continue;
      client.close();
      this.clients.delete(member);
      this.unsettled.delete(member);
    }
    this.rebuildRing("membership");
  }

  private addClient(member: string): void {
    const { host, port } = splitHostPort(member);
    const tls = this.clientTls();
    const client = new PeerClient({
      host,
      port,
      secret: this.config.clusterSecret!,
      nodeId: this.self,
      timeoutMs: this.config.peerTimeoutMs,
      heartbeatIntervalMs: this.config.heartbeatIntervalMs,
      failureTimeoutMs: this.config.failureTimeoutMs,
      logger: this.logger,
      ...(tls !== undefined ? { tls } : {}),
    });
    this.unsettled.add(member);
    client.on("up", () => {
      this.unsettled.delete(member);
      this.logger.info({ peer: member }, "peer up: joins the ring");
      this.rebuildRing("peer up");
    });
    client.on("down", (reason) => {
      const wasSettled = !this.unsettled.delete(member);
      if (wasSettled || this.ring.has(member)) this.logger.warn({ peer: member, reason }, "peer down: leaves the ring");
      this.rebuildRing("peer down");
    });
    this.clients.set(member, client);
    client.connect();
  }

  /** Self plus every configured member whose connection is up; swapped in one assignment. */
  private rebuildRing(why: string): void {
    if (this.stopped) return;
    const alive = [this.self];
    for (const [member, client] of this.clients) if (client.state === "up") alive.push(member);
    const next = new HashRing(alive);
    if (next.members.join() === this.ring.members.join()) return;
    this.ring = next;
    this.logger.info({ members: next.members, why }, "ring changed");
  }

  private serverTls(): PeerTlsOptions | undefined {
    const c = this.config;
    if (c.peerTlsCertFile === undefined || c.peerTlsKeyFile === undefined) return undefined;
    return { cert: readFileSync(c.peerTlsCertFile), key: readFileSync(c.peerTlsKeyFile) };
  }

  private clientTls(): PeerTlsOptions | undefined {
    const c = this.config;
    if (c.peerTlsCaFile === undefined && c.peerTlsCertFile === undefined) return undefined;
    return { ca: readFileSync(c.peerTlsCaFile ?? c.peerTlsCertFile!), rejectUnauthorized: true };
  }
}

import { readFileSync } from "node:fs";
import { algorithmByCode } from "../../algorithms/index.js";
import type { Config } from "../../config.js";
import type { LimitQuery } from "../../decision.js";
import type { Logger } from "../../logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import { DecideCode, PeerClient, PeerServer, type DecideResult, type PeerTlsOptions } from "../../peer/index.js";
import { BlockedCache } from "./blocked-cache.js";
import { CallMethod, decodeStates, mergeStates } from "./handoff.js";
import { handOverStates, type HandOffReport } from "./handoff-sender.js";
import { ClusterDecider, type ClusterView } from "./forwarding.js";
import { ClusterMetrics } from "../../metrics/cluster-metrics.js";
import type { LocalDecider } from "../table/local-decider.js";
import { DnsMembership, StaticMembership, type MembershipSource } from "./membership.js";
import { HashRing } from "./ring.js";
import { findSelf, splitHostPort } from "./self-address.js";
import { ringKeyOf, stateKeyOf } from "../table/state-key.js";
import type { StateTable } from "../table/state-table.js";

/** After a join, a second reconcile pass catches states created by forwards still in flight on the old ring. */
const RECONCILE_AGAIN_MS = 500;
/**
 * After adding a member, how long this node refuses forwarded decisions for keys that now
 * belong to it: long enough for every other node to add it too (reconnect backoff ≤ 2 s).
 */
const JOIN_FENCE_MS = 5000;
/** A starting node waits at most this long for every member's HANDOFF_DONE. */
const JOIN_TIMEOUT_MS = 10_000;

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
  frozen = false;
  /** members that announced they are leaving; they rejoin only as a new connection */
  private readonly departed = new Set<string>();
  private reconciling: Promise<void> | undefined;
  private reconcileAgain = false;
  private readonly table: StateTable;
  keysSent = 0;
  keysReceived = 0;
  /**
   * A node that has just started is joining until every member on its ring has handed it
   * the states that moved to it (HANDOFF_DONE). Meanwhile a key it holds no state for is
   * not decided on a partial state: it fails open.
   */
  private joining = true;
  private readonly doneFrom = new Set<string>();
  /** members added to the ring recently (until when): see JOIN_FENCE_MS */
  private readonly recentlyAdded = new Map<string, number>();
  /** members owed a HANDOFF_DONE once the running reconcile has sent their states */
  private readonly owedDone = new Set<string>();

  constructor(
    private readonly config: Config,
    local: LocalDecider,
    metrics: Metrics,
    private readonly logger: Logger,
  ) {
    this.table = local.table;
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
          // Handing over: this node's states are moving; the asking node fails open.
          if (this.frozen) throw new Error("handing over");
          const algorithm = algorithmByCode(algorithmCode);
          if (
            algorithm === undefined ||
            !(limit >= 1 && limit <= 1_000_000) ||
            !(duration >= 1 && duration <= 31_536_000) ||
            ns.length === 0 ||
            identifier.length === 0
          ) {
            throw new RangeError("forwarded decision out of contract");
          }
          const ringKey = ringKeyOf(ns, identifier);
          const now = Date.now();
          const owner = this.ring.owner(ringKey);
          if (owner !== this.self) {
            // The sender has not seen a member join that now owns this key; this node
            // has handed (or will hand) the key's state to it. Deciding here would use a
            // partial state: refuse, and the sender fails open.
            const fence = owner === undefined ? undefined : this.recentlyAdded.get(owner);
            if (fence !== undefined && now < fence) throw new Error("key moved to a joining member");
            // Otherwise the rings disagree for another reason: decide (never forward again),
            // and make sure the state reaches its owner once they agree.
            this.noteStrayState();
          }
          query.namespace = ns;
          query.identifier = identifier;
          query.limit = limit;
          query.duration = duration;
          query.algorithm = algorithm;
          if (this.isJoining && !this.holds(query, ringKey)) throw new Error("joining: state not here yet");
          const d = local.decideNow(query, ringKey, now);
          out.code = d.allowed ? DecideCode.ALLOWED : DecideCode.BLOCKED;
          out.remaining = d.remaining;
          out.resetTime = d.resetTime;
          out.retryAfterMs = d.retryAfterMs;
        },
        call: async (method, payload, from) => this.onCall(method, payload, from),
        // A member (re)started and reached us: reach it now rather than after our backoff,
        // so it joins every ring and receives its states within milliseconds.
        onPeerAuthenticated: (nodeId) => this.clients.get(nodeId)?.reconnectNow(),
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
    return this.settled && !this.isJoining;
  }

  private get settled(): boolean {
    return this.unsettled.size === 0 || Date.now() - this.startedAt > this.config.failureTimeoutMs;
  }

  /** See `joining`; ends once settled and every other ring member said HANDOFF_DONE, or on timeout. */
  get isJoining(): boolean {
    if (!this.joining) return false;
    if (Date.now() - this.startedAt > JOIN_TIMEOUT_MS) {
      this.joining = false;
      const missing = this.ring.members.filter((m) => m !== this.self && !this.doneFrom.has(m));
      this.logger.warn({ missing }, "join: not every member confirmed its hand-off in time; deciding anyway");
      return false;
    }
    if (!this.settled) return true;
    for (const m of this.ring.members) if (m !== this.self && !this.doneFrom.has(m)) return true;
    this.joining = false;
    this.logger.info({ members: this.ring.members, ms: Date.now() - this.startedAt }, "joined: every member handed over");
    return false;
  }

  /** Whether this node holds a state for the query's limit (a joining node decides only those). */
  holds(query: LimitQuery, ringKey: string): boolean {
    return this.table.get(stateKeyOf(query.algorithm.code, query.duration, ringKey)) !== undefined;
  }

  client(member: string): PeerClient | undefined {
    return this.clients.get(member);
  }

  get members(): readonly string[] {
    return this.configured;
  }

  /**
   * Leave the cluster without losing a counted request (DESIGN §4): freeze this node's
   * keys (they fail open instead of being decided on a state that is moving), send
   * every state to its owner on the ring without this node, then tell every peer to
   * drop this node. Bounded by `deadline` (unix ms).
   */
  async leave(deadline: number): Promise<HandOffReport> {
    const started = Date.now();
    this.frozen = true;
    const ringWithoutMe = this.ring.without(this.self);
    let report: HandOffReport = { sent: 0, failed: this.table.size, ms: 0 };
    if (ringWithoutMe.size > 0) {
      report = await this.handOver((key) => ringWithoutMe.owner(key), deadline);
    }
    const name = Buffer.from(this.self);
    await Promise.allSettled(
      [...this.clients.values()].filter((c) => c.state === "up").map((c) => c.call(CallMethod.LEAVE, name, Math.max(50, deadline - Date.now()))),
    );
    // From now on this node's own callers are forwarded to the new owners.
    this.ring = ringWithoutMe;
    report.ms = Date.now() - started;
    return report;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.strayTimer);
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
      // A member that left comes back as a new process, over a new connection.
      this.departed.delete(member);
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
    for (const [member, client] of this.clients) if (client.state === "up" && !this.departed.has(member)) alive.push(member);
    const next = new HashRing(alive);
    if (next.members.join() === this.ring.members.join()) return;
    const joined = next.members.filter((m) => !this.ring.has(m));
    this.ring = next;
    this.logger.info({ members: next.members, why }, "ring changed");
    // A member joined: keys that now belong to it move there from whoever holds them,
    // then it is told this node is done (it waits for that from every member when new).
    if (joined.length > 0 && !this.frozen) {
      const until = Date.now() + JOIN_FENCE_MS;
      for (const m of joined) {
        this.recentlyAdded.set(m, until);
        this.owedDone.add(m);
      }
      this.scheduleReconcile(true);
    }
  }

  private async handOver(ownerOf: (ringKey: string) => string | undefined, deadline: number): Promise<HandOffReport> {
    const report = await handOverStates(this.table, { self: this.self, ownerOf, peer: (m) => this.clients.get(m), deadline, logger: this.logger });
    this.keysSent += report.sent;
    return report;
  }

  private async onCall(method: number, payload: Buffer, from: string): Promise<Buffer> {
    if (method === CallMethod.LEAVE) {
      const member = payload.toString("utf8");
      this.logger.info({ member, from }, "member is leaving: drops out of the ring");
      this.departed.add(member);
      this.rebuildRing("member left");
      return Buffer.alloc(0);
    }
    if (method === CallMethod.MERGE_STATES) {
      // Leaving: whatever arrived now would be stranded here when this process exits.
      // Refused, the sender merges the batch back into its own table.
      if (this.frozen) throw new Error("leaving: not accepting states");
      const records = decodeStates(payload);
      const n = mergeStates(this.table, records, Date.now());
      this.keysReceived += n;
      const reply = Buffer.alloc(4);
      reply.writeUInt32BE(n, 0);
      return reply;
    }
    if (method === CallMethod.HANDOFF_DONE) {
      this.doneFrom.add(from);
      return Buffer.alloc(0);
    }
    throw new Error(`unknown call method ${method}`);
  }

  private strayTimer: NodeJS.Timeout | undefined;

  private noteStrayState(): void {
    if (this.strayTimer !== undefined || this.frozen || this.stopped) return;
    this.strayTimer = setTimeout(() => {
      this.strayTimer = undefined;
      if (!this.frozen && !this.stopped) this.scheduleReconcile(false);
    }, RECONCILE_AGAIN_MS);
    this.strayTimer.unref();
  }

  /** Send every state this node holds but does not own to its owner; run one at a time. */
  private scheduleReconcile(again: boolean): void {
    if (this.reconciling !== undefined) {
      this.reconcileAgain = true;
      return;
    }
    this.reconciling = (async () => {
      do {
        this.reconcileAgain = false;
        const ring = this.ring;
        const owed = [...this.owedDone].filter((m) => ring.has(m));
        for (const m of owed) this.owedDone.delete(m);
        const report = await this.handOver((key) => ring.owner(key), Date.now() + 30_000);
        if (report.sent > 0 || report.failed > 0) this.logger.info(report, "handed states to their new owners");
        await Promise.allSettled(owed.map((m) => this.clients.get(m)?.call(CallMethod.HANDOFF_DONE, Buffer.alloc(0))));
      } while (this.reconcileAgain && !this.stopped && !this.frozen);
    })().finally(() => {
      this.reconciling = undefined;
    });
    if (again) setTimeout(() => !this.stopped && !this.frozen && this.scheduleReconcile(false), RECONCILE_AGAIN_MS).unref();
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

import type { Logger } from "../../logger.js";
import { PeerClient, type PeerTlsOptions } from "../../peer/index.js";
import { HashRing } from "./ring.js";
import { findSelf, splitHostPort } from "./self-address.js";

export interface MemberPoolOptions {
  /** this node's ring name until the member list names it */
  self: string;
  peerHost: string;
  peerPort: number;
  nodeId: string | undefined;
  secret: string;
  peerTimeoutMs: number;
  heartbeatIntervalMs: number;
  failureTimeoutMs: number;
  /** read once, when the node is composed */
  clientTls: PeerTlsOptions | undefined;
  logger: Logger;
  /** the ring was swapped; `joined`: members new on it */
  onRingChanged(joined: readonly string[]): void;
  /** every configured member has been reached or found down once (or the failure timeout passed) */
  onSettled(): void;
}

/**
 * The configured members, one persistent peer client per other member, and the ring of
 * those believed alive. Failure detection is the clients' heartbeats: a member whose
 * connection is refused or lost, or that sends nothing for FAILURE_TIMEOUT_MS, leaves the
 * ring (its keys move to their next owner); when it answers again it comes back.
 */
export class MemberPool {
  self: string;
  /** members believed alive, this node included until it leaves; replaced, never mutated */
  ring: HashRing;
  /** See onSettled. A plain field: it advances on the clients' first up/down or on a timer. */
  settled = false;
  private configured: readonly string[] = [];
  private readonly clients = new Map<string, PeerClient>();
  /** members whose first connection attempt has not settled yet (up or down) */
  private readonly unsettled = new Set<string>();
  /** members that announced they are leaving; they rejoin only as a new connection */
  private readonly departed = new Set<string>();
  /** this node left the ring (graceful stop): rebuilds no longer put it back */
  private left = false;
  private stopped = false;
  private settleTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: MemberPoolOptions) {
    this.self = opts.self;
    this.ring = new HashRing([this.self]);
  }

  get configuredCount(): number {
    return this.configured.length;
  }

  client(member: string): PeerClient | undefined {
    return this.clients.get(member);
  }

  isUp(member: string): boolean {
    return this.clients.get(member)?.state === "up";
  }

  /** The peer clients that are up now. */
  upClients(): PeerClient[] {
    return [...this.clients.values()].filter((c) => c.state === "up");
  }

  peerStates(): [string, boolean][] {
    return [...this.clients].map(([m, c]) => [m, c.state === "up"]);
  }

  /** A new member list (PEERS, or a DNS answer). */
  setMembers(members: readonly string[]): void {
    const { peerHost, peerPort, nodeId, logger } = this.opts;
    const self = findSelf(members, peerHost, peerPort, nodeId);
    if (self !== undefined && self !== this.self) {
      logger.info({ self }, "found this node in the member list");
      this.self = self;
    } else if (self === undefined) {
      logger.warn({ self: this.self, members }, "this node is not in the member list; other nodes will not send it keys");
    }
    const first = this.configured.length === 0;
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
    if (first && !this.settled) {
      // Bounded by the failure timeout: a member that neither answers nor refuses does not hold this node back.
      this.settleTimer = setTimeout(() => this.settle(), this.opts.failureTimeoutMs);
      this.settleTimer.unref();
    }
    this.rebuildRing("membership");
    this.checkSettled();
  }

  /** A member announced it is leaving: it drops out of the ring now. */
  markDeparted(member: string): void {
    this.departed.add(member);
    this.rebuildRing("member left");
  }

  /** This node leaves: from now on its own callers are forwarded to the members that stay. */
  leaveRing(): void {
    this.left = true;
    this.ring = this.ring.without(this.self);
  }

  /** One peer up: reach it now rather than after the reconnect backoff. */
  reconnectNow(member: string): void {
    this.clients.get(member)?.reconnectNow();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.settleTimer);
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }

  private addClient(member: string): void {
    const { host, port } = splitHostPort(member);
    const o = this.opts;
    const client = new PeerClient({
      host,
      port,
      secret: o.secret,
      nodeId: this.self,
      // The handshake binds the member's name: whoever answers at its address must be it.
      serverNodeId: member,
      timeoutMs: o.peerTimeoutMs,
      heartbeatIntervalMs: o.heartbeatIntervalMs,
      failureTimeoutMs: o.failureTimeoutMs,
      logger: o.logger,
      ...(o.clientTls !== undefined ? { tls: o.clientTls } : {}),
    });
    this.unsettled.add(member);
    client.on("up", () => {
      this.unsettled.delete(member);
      // A member that left comes back as a new process, over a new connection.
      this.departed.delete(member);
      o.logger.info({ peer: member }, "peer up: joins the ring");
      this.rebuildRing("peer up");
      this.checkSettled();
    });
    client.on("down", (reason) => {
      const wasSettled = !this.unsettled.delete(member);
      if (wasSettled || this.ring.has(member)) o.logger.warn({ peer: member, reason }, "peer down: leaves the ring");
      this.rebuildRing("peer down");
      this.checkSettled();
    });
    this.clients.set(member, client);
    client.connect();
  }

  private checkSettled(): void {
    if (!this.settled && this.unsettled.size === 0) this.settle();
  }

  private settle(): void {
    if (this.settled || this.stopped) return;
    this.settled = true;
    clearTimeout(this.settleTimer);
    this.opts.onSettled();
  }

  /** This node plus every configured member whose connection is up; swapped in one assignment. */
  private rebuildRing(why: string): void {
    if (this.stopped) return;
    const alive = this.left ? [] : [this.self];
    for (const [member, client] of this.clients) if (client.state === "up" && !this.departed.has(member)) alive.push(member);
    const next = new HashRing(alive);
    if (next.members.join() === this.ring.members.join()) return;
    const joined = next.members.filter((m) => !this.ring.has(m));
    this.ring = next;
    this.opts.logger.info({ members: next.members, why }, "ring changed");
    this.opts.onRingChanged(joined);
  }
}

import type { Logger } from "../../../logger.js";
import type { PeerStateSample } from "../../../metrics/cluster-metrics.js";
import { PeerClient, processLoopLag, type PeerTlsOptions, type ProtocolRange } from "../../../peer/index.js";
import { RingProtocol } from "./ring-protocol.js";
import { performance } from "node:perf_hooks";
import { hasQuorum, QuorumLog } from "./quorum.js";
import { HashRing } from "../../ring/ring.js";
import { OwnerDoubts } from "./owner-doubts.js";
import { SlowPeers } from "./slow-peers.js";
import { findSelf, splitHostPort } from "./self-address.js";
import { MemberLists } from "./member-lists.js";

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
  /** TAKEOVER_HOLD_MS: see OwnerDoubts */
  takeoverHoldMs: number;
  /** ZONE: this node's failure domain ("" unset); each peer's comes with its handshake */
  zone: string;
  /** MAX_CLOCK_SKEW_MS: a peer's clock further off is logged (at most once a minute per peer) */
  maxClockSkewMs: number;
  /** read once, when the node is composed */
  clientTls: PeerTlsOptions | undefined;
  /** the peer protocol versions this node speaks (PEER_PROTOCOL_MAX holds the top) */
  protocol: ProtocolRange;
  /** PEERS (a list fixed for the life of the process), not PEERS_DNS: members compare their lists */
  staticMembers: boolean;
  logger: Logger;
  /** the ring was swapped; `joined`: members new on it */
  onRingChanged(joined: readonly string[]): void;
  /** every configured member has been reached or found down once (or the failure timeout passed) */
  onSettled(): void;
  /** a member's heartbeat told its policy version (first on a connection, then on each change) */
  onPeerPolicyVersion?(member: string, version: string): void;
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
  /** members dropped from the ring that may still be deciding their keys (see OwnerDoubts) */
  readonly doubts: OwnerDoubts;
  /** the version the ring runs at, from the members' ranges (ring-protocol.ts) */
  readonly protocol: RingProtocol;
  /** With PEERS: how the lists of the members up stand to this node's, which shapes the ring (member-lists.ts). */
  readonly lists = new MemberLists();
  /** members whose handshake refused this node's proof or theirs (another CLUSTER_SECRET, another node at the address), until one succeeds */
  readonly unauthenticated = new Set<string>();
  /** See onSettled. A plain field: it advances on the clients' first up/down or on a timer. */
  settled = false;
  private configured: readonly string[] = [];
  private readonly clients = new Map<string, PeerClient>();
  /** members whose first connection attempt has not settled yet (up or down) */
  private readonly unsettled = new Set<string>();
  /** members that announced they are leaving; they rejoin only as a new connection */
  private readonly departed = new Set<string>();
  /** last heartbeat round trip per member, from the clients' 'rtt' events */
  private readonly rttMs = new Map<string, number>();
  /** this node left the ring (graceful stop): rebuilds no longer put it back */
  private left = false;
  private stopped = false;
  private settleTimer: NodeJS.Timeout | undefined;
  private readonly quorumLog: QuorumLog;
  private quorumTimer: NodeJS.Timeout | undefined;
  private readonly slow: SlowPeers;
  private readonly skewLoggedAt = new Map<string, number>();
  private slowTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: MemberPoolOptions) {
    this.self = opts.self;
    this.ring = new HashRing([this.self]);
    this.quorumLog = new QuorumLog(opts.logger);
    this.slow = new SlowPeers(opts.peerTimeoutMs, opts.failureTimeoutMs);
    this.doubts = new OwnerDoubts(opts.takeoverHoldMs);
    this.protocol = new RingProtocol(opts.protocol, opts.logger);
  }

  get configuredCount(): number {
    return this.configured.length;
  }

  /** Members this node cannot agree with on any key: no shared protocol version, another PEERS list, or no authentication. */
  get apart(): number {
    return this.protocol.incompatible + this.lists.other.size + this.unauthenticated.size;
  }

  /** Configured members that have not announced a graceful leave: the ones a quorum counts. */
  get voters(): number {
    let n = 0;
    for (const m of this.configured) if (!this.departed.has(m)) n++;
    return n;
  }

  /** This node sees a majority of the voters (itself included), see quorum.ts. */
  get quorum(): boolean {
    return hasQuorum(this.ring.size, this.voters);
  }

  /** Whether this node has seen a quorum since it started: until then it is not ready (Cluster.ready). */
  hadQuorum = false;

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

  /** Each peer's clock offset (ms, the peer's wall clock minus this node's), where measured. */
  clockOffsets(): [string, number][] {
    const offsets: [string, number][] = [];
    for (const [m, c] of this.clients) if (!Number.isNaN(c.clockOffsetMs)) offsets.push([m, c.clockOffsetMs]);
    return offsets;
  }

  /** Forwards timed out here that a peer allowed (and counted) after all, summed over peers. */
  lateAllowed(): number {
    let n = 0;
    for (const c of this.clients.values()) n += c.lateAllowed;
    return n;
  }

  /** Each peer: whether its connection is up, and its last heartbeat round trip (ms; NaN before the first). */
  peerStates(): PeerStateSample[] {
    return [...this.clients].map(([member, c]) => ({ member, up: c.state === "up", rttMs: this.rttMs.get(member) ?? NaN }));
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
    this.protocol.keepOnly(this.configured);
    if (this.opts.staticMembers) this.lists.setOwn(this.configured);
    for (const member of this.configured) {
      if (member === this.self || this.clients.has(member)) continue;
      this.addClient(member);
    }
    for (const [member, client] of this.clients) {
      if (this.configured.includes(member)) continue;
      client.close();
      this.lists.forget(member);
      this.unauthenticated.delete(member);
      this.doubts.cleared(member);
      this.clients.delete(member);
      this.unsettled.delete(member);
      this.slow.forget(member);
      this.rttMs.delete(member);
    }
    if (first && !this.settled) {
      // Bounded by the failure timeout: a member that neither answers nor refuses does not hold this node back.
      this.settleTimer = setTimeout(() => this.settle(), this.opts.failureTimeoutMs);
      this.settleTimer.unref();
    }
    this.rebuildRing("membership");
    this.checkSettled();
  }

  /**
   * A forward to `member` was answered or missed its deadline. A member whose forwards keep
   * timing out leaves the ring until it is fast again (see slow-peers.ts).
   */
  noteForward(member: string, timedOut: boolean, now: number): void {
    // A forward that missed its deadline while this node's own loop stalled for half of it
    // says nothing about the peer (its answer may be waiting unread): not counted.
    const timeoutMs = this.opts.peerTimeoutMs;
    if (timedOut && processLoopLag.lagWithin(performance.now(), timeoutMs) >= timeoutMs / 2) return;
    if (!this.slow.note(member, timedOut, now)) return;
    // Slow, not stopped: it goes on deciding what reaches it by the other members.
    if (this.ring.has(member)) this.doubts.dropped(member, now);
    this.opts.logger.warn(
      { peer: member, holdMs: this.slow.holdMs(member) },
      "peer suspected: its forwards keep missing PEER_TIMEOUT_MS; it leaves the ring until its heartbeats are fast again",
    );
    this.rebuildRing("peer slow");
    if (this.slowTimer === undefined) {
      this.slowTimer = setInterval(() => this.releaseSlow(), 250);
      this.slowTimer.unref();
    }
  }

  /** A member announced it is leaving: it drops out of the ring now. */
  markDeparted(member: string): void {
    this.departed.add(member);
    this.doubts.cleared(member);
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
    clearInterval(this.quorumTimer);
    clearInterval(this.slowTimer);
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
      protocol: o.protocol,
      membersTag: () => this.lists.requestTag,
      ...(o.clientTls !== undefined ? { tls: o.clientTls } : {}),
    });
    this.unsettled.add(member);
    client.refusals.onChange = () => {
      const reason = client.refusals.reason;
      if (reason !== undefined && AUTH_REFUSALS.has(reason)) this.unauthenticated.add(member);
      else this.unauthenticated.delete(member);
    };
    client.on("up", () => {
      if (client.link.remote !== undefined) this.protocol.linked(member, client.link.remote);
      this.compareLists(member, client.link.remoteMembersTag);
      this.unsettled.delete(member);
      this.doubts.cleared(member);
      // A member that left comes back as a new process, over a new connection.
      this.departed.delete(member);
      o.logger.info({ peer: member }, "peer up: joins the ring");
      this.rebuildRing("peer up");
      this.checkSettled();
    });
    client.on("rtt", (ms) => {
      const now = Date.now();
      this.rttMs.set(member, ms);
      this.slow.noteRtt(member, ms, now);
      this.checkClock(member, client.clockOffsetMs, now);
    });
    client.on("tag", (version) => o.onPeerPolicyVersion?.(member, version));
    client.on("down", (reason, silent) => {
      if (client.link.apart) this.protocol.refused(member, client.link.remote!);
      const wasSettled = !this.unsettled.delete(member);
      this.lists.forget(member);
      if (silent && this.ring.has(member)) this.doubts.dropped(member, Date.now());
      if (wasSettled || this.ring.has(member)) o.logger.warn({ peer: member, reason }, "peer down: leaves the ring");
      this.rebuildRing("peer down");
      this.checkSettled();
    });
    this.clients.set(member, client);
    client.connect();
  }

  /**
   * A member came up telling its list's tag. A list this node cannot relate to its own keeps
   * the member out of the ring (and this node out of its), said once per connection.
   * Invariant: every node's ring is its own list less the members some member up does not
   * list (member-lists.ts), so holders of the old and the new list build the same ring while
   * PEERS is edited node by node, and no two nodes route a key to different owners.
   */
  private compareLists(member: string, tag: string): void {
    const was = this.lists.other.has(member);
    const relation = this.lists.linked(member, tag);
    if (relation === "lacks" || relation === "more")
      this.opts.logger.info(
        { peer: member, relation },
        "this member was given another PEERS list, one this node can relate to: the ring holds the members both list",
      );
    if (relation !== "other" || was) return;
    this.opts.logger.error(
      { peer: member, members: this.configured },
      "this member was given a PEERS list this node cannot relate to its own (more than two members apart): each keeps the other out of its ring (docs/operations.md, Scaling with PEERS)",
    );
  }

  /**
   * States cross nodes as ages, so a skew costs no counts and grants no refill; but each
   * node aligns windows to its own clock, and a forwarded answer's reset time is the
   * owner's (refused beyond peer-data.ts CLOCK_SKEW_MS): say so, at most once a minute per
   * peer (docs/faults.md).
   */
  private checkClock(member: string, offsetMs: number, now: number): void {
    if (!(Math.abs(offsetMs) > this.opts.maxClockSkewMs)) return;
    if (now - (this.skewLoggedAt.get(member) ?? -Infinity) < 60_000) return;
    this.skewLoggedAt.set(member, now);
    this.opts.logger.warn(
      { peer: member, offsetMs: Math.round(offsetMs), maxClockSkewMs: this.opts.maxClockSkewMs },
      "peer clock skew above MAX_CLOCK_SKEW_MS: its windows end at other moments than this node's and its answers carry reset times on its clock; fix NTP",
    );
  }

  private releaseSlow(): void {
    const released = this.slow.release(Date.now());
    for (const member of released) this.opts.logger.info({ peer: member }, "peer fast again: rejoins the ring");
    if (released.length > 0) this.rebuildRing("peer fast again");
    if (!this.slow.anySuspected) {
      clearInterval(this.slowTimer);
      this.slowTimer = undefined;
    }
  }

  /** Log a lost or regained quorum; while it stays lost, a timer repeats the warning (rate-limited by QuorumLog). */
  private checkQuorum(): void {
    if (!this.settled || this.left) return;
    const quorum = this.quorum;
    if (quorum) this.hadQuorum = true;
    this.quorumLog.update(quorum, this.ring.size, this.voters, Date.now(), this.hadQuorum);
    if (!quorum && this.quorumTimer === undefined) {
      this.quorumTimer = setInterval(() => this.checkQuorum(), 1000);
      this.quorumTimer.unref();
    } else if (quorum && this.quorumTimer !== undefined) {
      clearInterval(this.quorumTimer);
      this.quorumTimer = undefined;
    }
  }

  private checkSettled(): void {
    if (!this.settled && this.unsettled.size === 0) this.settle();
  }

  private settle(): void {
    if (this.settled || this.stopped) return;
    this.settled = true;
    clearTimeout(this.settleTimer);
    this.checkQuorum();
    this.opts.onSettled();
  }

  /** This node plus every configured member whose connection is up and that is not suspected of being slow; swapped in one assignment. */
  private rebuildRing(why: string): void {
    if (this.stopped) return;
    // Members some member up does not list are left out, this node too (it then forwards every key).
    const excluded = this.lists.excluded();
    const alive = this.left || excluded.has(this.self) ? [] : [this.self];
    const zones = new Map<string, string>([[this.self, this.opts.zone]]);
    for (const [member, client] of this.clients) {
      if (client.state !== "up" || this.departed.has(member) || this.slow.isSuspected(member) || this.lists.other.has(member) || excluded.has(member)) continue;
      alive.push(member);
      zones.set(member, client.remoteZone);
    }
    const next = new HashRing(alive, undefined, zones);
    // A member's zone can change only with a new process (a new handshake): compared too.
    if (next.members.join() === this.ring.members.join() && sameZones(next, this.ring)) {
      this.doubts.update(this.ring, Date.now());
      return;
    }
    this.doubts.update(next, Date.now());
    const joined = next.members.filter((m) => !this.ring.has(m));
    this.ring = next;
    this.opts.logger.info({ members: next.members, why }, "ring changed");
    this.checkQuorum();
    this.opts.onRingChanged(joined);
  }
}

/** Handshake refusals (HandshakeError reasons) that mean the two nodes do not share a secret or a name: no ring can hold both. */
const AUTH_REFUSALS = new Set(["bad_proof", "wrong_node"]);

function sameZones(a: HashRing, b: HashRing): boolean {
  for (const m of a.members) if ((a.zones.get(m) ?? "") !== (b.zones.get(m) ?? "")) return false;
  return true;
}

import { Gauge, type Registry } from "prom-client";
import { FastHistogram } from "./fast-histogram.js";
import { pulledCounter, pulledGauge, pulledLabelledCounter } from "./pulled.js";

/** Items per frame or batch: powers of two up to MAX_DECIDE_ITEMS (512). */
export const FRAME_ITEM_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512];

const OUTCOMES = ["allowed", "blocked", "cached_block", "timeout", "unavailable", "error", "invalid", "shared"] as const;
export type ForwardOutcome = (typeof OUTCOMES)[number];

export interface PeerStateSample {
  member: string;
  up: boolean;
  /** last heartbeat round trip; NaN before the first */
  rttMs: number;
}

/** Cluster metrics, registered into the node's registry when peers are configured. */
export class ClusterMetrics {
  private readonly outcomes = new Float64Array(OUTCOMES.length);
  private readonly roundTrip: FastHistogram;
  private readonly frameItems: FastHistogram;
  /** allowed forwards whose caller left before the answer was written, given back on their owner */
  givenBack = 0;

  constructor(
    registry: Registry,
    sources: {
      members: () => number;
      configured: () => number;
      quorum: () => boolean;
      clockOffsets: () => Iterable<[string, number]>;
      peerStates: () => Iterable<PeerStateSample>;
      /** forwards answered here as timed out whose "allowed" came back later (the owner counted them) */
      lateAllowed: () => number;
      /** forwarded items this node dropped undecided: their sender's deadline budget had run out */
      expiredForwards: () => number;
      /** socket reads of other members' connections that carried at least one DECIDE frame (as an owner) */
      decideReads: () => number;
      /** requests owners granted this node beyond its shares (LEASE, opening grants), and those it gave back unused */
      sharesGranted: () => number;
      sharesReturned: () => number;
    },
  ) {
    pulledLabelledCounter(
      registry,
      "ringlimit_forwarded_total",
      "Decisions for keys owned by another node, by outcome (cached_block: answered 429 from the owner's earlier block; invalid: the owner's answer was out of bounds, failed open; shared: answered here from this node's share of the key, not sent)",
      "outcome",
      OUTCOMES,
      this.outcomes,
    );
    pulledCounter(
      registry,
      "ringlimit_forward_late_allowed_total",
      "Forwards answered here fail-open (degraded, peer_timeout) that their owner decided and counted after all: its allowed answer came back late (docs/faults.md)",
      sources.lateAllowed,
    );
    pulledCounter(
      registry,
      "ringlimit_forward_expired_total",
      "Forwarded decisions received by this node after their sender's deadline budget ran out: dropped, not decided, not counted",
      sources.expiredForwards,
    );
    pulledCounter(
      registry,
      "ringlimit_peer_decide_reads_total",
      "Socket reads of other members' connections that carried at least one DECIDE frame (as an owner): with ringlimit_peer_decide_frame_decisions_count, the frames one read amortises (each read is a wake-up and a syscall, whatever it carries)",
      sources.decideReads,
    );
    pulledCounter(
      registry,
      "ringlimit_forward_given_back_total",
      "Forwarded decisions allowed and counted by their owner whose caller left before the answer was written (a closed connection, an aborted request): given back on the owner (docs/api.md, Pipelining)",
      () => this.givenBack,
    );
    pulledCounter(
      registry,
      "ringlimit_share_granted_total",
      "Requests the owners of keys granted this node beyond its shares of their windows (LEASE, and opening grants that came back with a forwarded decision), counted on the owner at once (docs/api.md, Shares)",
      sources.sharesGranted,
    );
    pulledCounter(
      registry,
      "ringlimit_share_returned_total",
      "Requests granted to this node that it gave back to their owner unused, after a second without a request for the key",
      sources.sharesReturned,
    );
    this.roundTrip = new FastHistogram(
      "ringlimit_peer_round_trip_seconds",
      "Forwarded decision round trip, from send to answer, for answered forwards",
      [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
      registry,
    );
    this.frameItems = new FastHistogram(
      "ringlimit_peer_decide_frame_decisions",
      "Decisions per DECIDE frame this node received from another member (as an owner): how many forwarded decisions share one frame, its tag and its syscalls (bench/README.md, the peer path)",
      FRAME_ITEM_BUCKETS,
      registry,
    );
    pulledGauge(registry, "ringlimit_ring_members", "Members on this node's ring (itself included): the ones it believes alive", sources.members);
    pulledGauge(
      registry,
      "ringlimit_configured_members",
      "Members from PEERS / PEERS_DNS (itself included), less those that left gracefully (SIGTERM)",
      sources.configured,
    );
    pulledGauge(
      registry,
      "ringlimit_cluster_quorum",
      "1 while this node sees a majority of the configured members (itself included); 0 in a minority, when /ready is 503 (from 3 members on)",
      () => (sources.quorum() ? 1 : 0),
    );
    new Gauge({
      name: "ringlimit_peer_clock_offset_seconds",
      help: "The peer's wall clock minus this node's, estimated from heartbeats to within half a round trip (peers whose clock is not known yet are left out)",
      labelNames: ["peer"],
      registers: [registry],
      collect() {
        this.reset();
        for (const [peer, ms] of sources.clockOffsets()) this.set({ peer }, ms / 1000);
      },
    });
    new Gauge({
      name: "ringlimit_peer_up",
      help: "1 when the authenticated connection to the peer is up and answering heartbeats",
      labelNames: ["peer"],
      registers: [registry],
      collect() {
        this.reset();
        for (const { member, up } of sources.peerStates()) this.set({ peer: member }, up ? 1 : 0);
      },
    });
    new Gauge({
      name: "ringlimit_peer_heartbeat_seconds",
      help: "Round trip of the last heartbeat (PING/PONG) to the peer; absent before the first",
      labelNames: ["peer"],
      registers: [registry],
      collect() {
        this.reset();
        for (const { member, rttMs } of sources.peerStates()) if (!Number.isNaN(rttMs)) this.set({ peer: member }, rttMs / 1000);
      },
    });
  }

  forwardOutcome(outcome: ForwardOutcome): void {
    this.outcomes[OUTCOMES.indexOf(outcome)]!++;
  }

  /** A DECIDE frame of `items` decisions arrived from a member. */
  observeDecideFrame(items: number): void {
    this.frameItems.observe(items);
  }

  observeForward(ms: number): void {
    this.roundTrip.observe(ms / 1000);
  }
}

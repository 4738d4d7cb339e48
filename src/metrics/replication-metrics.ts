import type { Registry } from "prom-client";
import { FastHistogram } from "./fast-histogram.js";
import { pulledCounter, pulledGauge } from "./pulled.js";
import { FRAME_ITEM_BUCKETS } from "./cluster-metrics.js";

/** Replication metrics (REPLICAS > 1; docs/durability.md). Counted per batch, read when scraped. */
export class ReplicationMetrics {
  private statesReplicated = 0;
  private statesDropped = 0;
  private statesPromoted = 0;
  private readonly lag: FastHistogram;
  private readonly batchStates: FastHistogram;

  constructor(registry: Registry, replicaStates: () => number, backlog: () => number) {
    this.lag = new FastHistogram(
      "ringlimit_replication_lag_seconds",
      "From a state's change on its owner to the replica's answer that it holds it, per replication batch",
      [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registry,
    );
    this.batchStates = new FastHistogram(
      "ringlimit_replication_batch_states",
      "States per replication call this node sent (one REPLICATE frame each): how many changes share one frame, its tag and its syscalls",
      FRAME_ITEM_BUCKETS,
      registry,
    );
    pulledCounter(
      registry,
      "ringlimit_states_replicated_total",
      "States sent to a replica and acknowledged (a state changed many times in one event-loop turn counts once per replica)",
      () => this.statesReplicated,
    );
    pulledCounter(
      registry,
      "ringlimit_replication_dropped_total",
      "States not replicated: the replica was down, too far behind or did not answer (the pass after a ring change catches up)",
      () => this.statesDropped,
    );
    pulledCounter(registry, "ringlimit_replicas_promoted_total", "Replica states taken over because this node became their owner", () => this.statesPromoted);
    pulledGauge(registry, "ringlimit_replica_states", "States held here as replicas of other owners", replicaStates);
    pulledGauge(
      registry,
      "ringlimit_replication_backlog_states",
      "States changed here and not yet acknowledged by their replicas (in a batch or a call, once per replica); 0 when replication has caught up",
      backlog,
    );
  }

  /** A replication call of `states` states was sent. */
  sent(states: number): void {
    this.batchStates.observe(states);
  }

  replicated(states: number, lagSeconds: number): void {
    this.statesReplicated += states;
    this.lag.observe(lagSeconds);
  }

  dropped(states: number): void {
    this.statesDropped += states;
  }

  promoted(states: number): void {
    this.statesPromoted += states;
  }
}

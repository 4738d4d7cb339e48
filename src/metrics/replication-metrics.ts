import { Counter, Gauge, type Registry } from "prom-client";
import { FastHistogram } from "./fast-histogram.js";

/** Replication metrics (REPLICAS > 1; docs/durability.md). Counted per batch, read when scraped. */
export class ReplicationMetrics {
  private statesReplicated = 0;
  private statesDropped = 0;
  private statesPromoted = 0;
  private readonly lag: FastHistogram;

  constructor(registry: Registry, replicaStates: () => number) {
    this.lag = new FastHistogram(
      "ringlimit_replication_lag_seconds",
      "From a state's change on its owner to the replica's answer that it holds it, per replication batch",
      [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registry,
    );
    const self = this;
    new Counter({
      name: "ringlimit_states_replicated_total",
      help: "States sent to a replica and acknowledged (a state changed many times in one event-loop turn counts once per replica)",
      registers: [registry],
      collect() {
        this.reset();
        this.inc(self.statesReplicated);
      },
    });
    new Counter({
      name: "ringlimit_replication_dropped_total",
      help: "States not replicated: the replica was down, too far behind or did not answer (the pass after a ring change catches up)",
      registers: [registry],
      collect() {
        this.reset();
        this.inc(self.statesDropped);
      },
    });
    new Counter({
      name: "ringlimit_replicas_promoted_total",
      help: "Replica states taken over because this node became their owner",
      registers: [registry],
      collect() {
        this.reset();
        this.inc(self.statesPromoted);
      },
    });
    new Gauge({
      name: "ringlimit_replica_states",
      help: "States held here as replicas of other owners",
      registers: [registry],
      collect() {
        this.set(replicaStates());
      },
    });
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

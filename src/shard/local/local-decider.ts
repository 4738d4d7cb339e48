import { newStep, type Algorithm } from "../../algorithms/index.js";
import { newDecision, type BatchOutcome, type Decider, type Decision, type ResetOutcome, type ResetQuery } from "../../decision.js";
import type { LimitQuery } from "../../decision.js";
import { decideBatchOn } from "./batch.js";
import { Reservations } from "./reservations.js";
import { resetOn } from "./reset.js";
import { ringKeyOf, stateKeyOf } from "../ring/state-key.js";
import type { StateTable } from "../table/state-table.js";

/** Decides from this node's own state table. Synchronous. */
export class LocalDecider implements Decider {
  private readonly step = newStep();
  private readonly decision = newDecision();

  /** one owner's parts of batches across owners, held until committed or released */
  readonly reservations: Reservations;

  constructor(readonly table: StateTable) {
    this.reservations = new Reservations(table);
  }

  decide(query: LimitQuery, now: number, done: (decision: Decision) => boolean): void {
    done(this.decideSync(query, now));
  }

  decideSync(query: LimitQuery, now: number): Decision {
    return this.decideNow(query, ringKeyOf(query.namespace, query.identifier), now);
  }

  decideNow(query: LimitQuery, ringKey: string, now: number): Decision {
    return this.decideKey(ringKey, query.algorithm, query.limit, query.duration, now, query.cost);
  }

  /** The entry point for decisions forwarded by peers: they arrive as fields, with no LimitQuery. */
  decideKey(ringKey: string, algorithm: Algorithm, limit: number, duration: number, now: number, cost = 1): Decision {
    const step = this.step;
    this.table.decide(stateKeyOf(algorithm.code, duration, ringKey), algorithm, limit, duration * 1000, now, step, cost);
    const d = this.decision;
    d.allowed = step.allowed;
    d.remaining = step.remaining;
    d.resetTime = Math.ceil(step.resetMs / 1000);
    d.retryAfterMs = step.retryAfterMs;
    d.degraded = null;
    return d;
  }

  decideBatch(queries: readonly LimitQuery[], now: number, done: (outcome: BatchOutcome) => void): void {
    const ringKeys = queries.map((q) => ringKeyOf(q.namespace, q.identifier));
    done({ decisions: decideBatchOn(this.table, queries, ringKeys, now, true).decisions, degraded: null });
  }

  reset(query: ResetQuery, now: number, done: (outcome: ResetOutcome) => void): void {
    done({ ok: true, removed: resetOn(this.table, ringKeyOf(query.namespace, query.identifier), query.algorithm, query.duration, now) });
  }
}

import { newStep, type Algorithm } from "../../algorithms/index.js";
import { newDecision, type Decider, type Decision } from "../../decision.js";
import type { LimitQuery } from "../../decision.js";
import { ringKeyOf, stateKeyOf } from "./state-key.js";
import type { StateTable } from "./state-table.js";

/** Decides from this node's own state table. Synchronous. */
export class LocalDecider implements Decider {
  private readonly step = newStep();
  private readonly decision = newDecision();

  constructor(readonly table: StateTable) {}

  decide(query: LimitQuery, now: number, done: (decision: Decision) => void): void {
    done(this.decideSync(query, now));
  }

  decideSync(query: LimitQuery, now: number): Decision {
    return this.decideNow(query, ringKeyOf(query.namespace, query.identifier), now);
  }

  decideNow(query: LimitQuery, ringKey: string, now: number): Decision {
    return this.decideKey(ringKey, query.algorithm, query.limit, query.duration, now);
  }

  /** The entry point for decisions forwarded by peers: they arrive as fields, with no LimitQuery. */
  decideKey(ringKey: string, algorithm: Algorithm, limit: number, duration: number, now: number): Decision {
    const step = this.step;
    this.table.decide(stateKeyOf(algorithm.code, duration, ringKey), algorithm, limit, duration * 1000, now, step);
    const d = this.decision;
    d.allowed = step.allowed;
    d.remaining = step.remaining;
    d.resetTime = Math.ceil(step.resetMs / 1000);
    d.retryAfterMs = step.retryAfterMs;
    d.degraded = null;
    return d;
  }
}

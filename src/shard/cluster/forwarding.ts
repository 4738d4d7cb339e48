import { newDecision, failOpenDecision, type Decider, type Decision, type DegradedReason } from "../../decision.js";
import type { LimitQuery } from "../../decision.js";
import type { PeerClient, PeerError } from "../../peer/index.js";
import type { BlockedCache } from "./blocked-cache.js";
import type { ClusterMetrics } from "../../metrics/cluster-metrics.js";
import type { LocalDecider } from "../table/local-decider.js";
import type { HashRing } from "./ring.js";
import { ringKeyOf, stateKeyOf } from "../table/state-key.js";

/** What the decider needs to know about the cluster at the moment of a decision. */
export interface ClusterView {
  readonly self: string;
  /** members this node believes alive; replaced, never mutated */
  readonly ring: HashRing;
  /** handing this node's states over: its own keys fail open until they have moved */
  readonly frozen: boolean;
  /** just started: keys whose state has not arrived yet fail open (see Cluster) */
  readonly isJoining: boolean;
  holds(query: LimitQuery, ringKey: string): boolean;
  client(member: string): PeerClient | undefined;
}

const REASON: Record<string, DegradedReason> = { timeout: "peer_timeout", unavailable: "peer_unavailable" };

/**
 * Front end → ring → (local table | owning peer). Keys this node owns are decided here;
 * the rest are forwarded, and a forward that fails or misses its deadline becomes a
 * fail-open answer, so a caller never waits longer than PEER_TIMEOUT_MS for a dead owner.
 */
export class ClusterDecider implements Decider {
  private readonly cachedBlock: Decision = newDecision();

  constructor(
    private readonly view: ClusterView,
    private readonly local: LocalDecider,
    private readonly blocked: BlockedCache,
    private readonly metrics: ClusterMetrics,
  ) {}

  /** What decideSync found for the query it declined, so decide() need not look again. */
  private declined: { query: LimitQuery | undefined; ringKey: string; owner: string | undefined } = { query: undefined, ringKey: "", owner: undefined };

  /** Keys this node owns are answered at once; undefined means "use decide()". */
  decideSync(query: LimitQuery, now: number): Decision | undefined {
    const view = this.view;
    const ringKey = ringKeyOf(query.namespace, query.identifier);
    const owner = view.ring.owner(ringKey);
    if ((owner === undefined || owner === view.self) && !view.frozen && !view.isJoining) return this.local.decideNow(query, ringKey, now);
    const declined = this.declined;
    declined.query = query;
    declined.ringKey = ringKey;
    declined.owner = owner;
    return undefined;
  }

  decide(query: LimitQuery, now: number, done: (decision: Decision) => void): void {
    const view = this.view;
    const declined = this.declined;
    const known = declined.query === query;
    declined.query = undefined;
    const ringKey = known ? declined.ringKey : ringKeyOf(query.namespace, query.identifier);
    const owner = known ? declined.owner : view.ring.owner(ringKey);
    if (owner === undefined || owner === view.self) {
      if (view.frozen || (view.isJoining && !view.holds(query, ringKey))) return done(failOpenDecision(query, now, "handoff", newDecision()));
      return done(this.local.decideNow(query, ringKey, now));
    }

    const stateKey = stateKeyOf(query.algorithm.code, query.duration, ringKey);
    const block = this.blocked.get(stateKey, query.limit, now);
    if (block !== undefined) {
      this.metrics.forwardOutcome("cached_block");
      const d = this.cachedBlock;
      d.allowed = false;
      d.remaining = 0;
      d.resetTime = block.resetTime;
      d.retryAfterMs = block.until - now;
      d.degraded = null;
      return done(d);
    }

    const client = view.client(owner);
    if (client === undefined) {
      this.metrics.forwardOutcome("unavailable");
      return done(failOpenDecision(query, now, "peer_unavailable", newDecision()));
    }
    const sentAt = performance.now();
    client.decide(query.namespace, query.identifier, query.algorithm.code, query.limit, query.duration, (err: PeerError | null, r) => {
      const d = newDecision();
      if (err !== null || r === null || r.code === 2) {
        const reason = err !== null ? (REASON[err.code] ?? "peer_error") : "peer_error";
        this.metrics.forwardOutcome(reason === "peer_timeout" ? "timeout" : reason === "peer_unavailable" ? "unavailable" : "error");
        return done(failOpenDecision(query, now, reason, d));
      }
      this.metrics.observeForward(performance.now() - sentAt);
      d.allowed = r.code === 0;
      d.remaining = r.remaining;
      d.resetTime = r.resetTime;
      d.retryAfterMs = r.retryAfterMs;
      d.degraded = null;
      if (!d.allowed) this.blocked.remember(stateKey, query.limit, now, r.retryAfterMs, r.resetTime);
      this.metrics.forwardOutcome(d.allowed ? "allowed" : "blocked");
      done(d);
    });
  }
}

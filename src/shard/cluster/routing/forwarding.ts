import { algorithmByCode, type Algorithm } from "../../../algorithms/index.js";
import { newDecision, failOpenDecision, type AppliedLimit, type BatchOutcome, type Decider, type Decision } from "../../../decision.js";
import type { ReleaseOutcome, ReleaseQuery, ResetOutcome, ResetQuery } from "../../../decision.js";
import { concurrency } from "../../../algorithms/concurrency.js";
import { decodeReleaseReply, encodeRelease } from "../wire/release-wire.js";
import type { LimitQuery } from "../../../decision.js";
import { DecideFlag, DecideItemFlag, type DecideResult, type PeerClient, type PeerError } from "../../../peer/index.js";
import type { BlockedCache } from "./blocked-cache.js";
import type { ClusterMetrics } from "../../../metrics/cluster-metrics.js";
import type { LocalDecider } from "../../local/local-decider.js";
import type { BatchForwarder } from "./batch-forwarding.js";
import { degradedReasonOf } from "./degraded-reason.js";
import { ownership, type Ownership, type OwnershipView } from "./ownership.js";
import { replyWithinContract, resetTimeHere } from "../wire/peer-data.js";
import { encodeGiveBack } from "../wire/batch-wire.js";
import { CallMethod } from "../wire/call-methods.js";
import { ringKeyOf, stateKeyOf } from "../../ring/state-key.js";
import type { Shares } from "../leases/shares.js";

/** What the decider needs to know about the cluster at the moment of a decision. */
export interface ClusterView extends OwnershipView {
  client(member: string): PeerClient | undefined;
  /** a forward to `member` was answered, or missed its deadline (feeds the slow-peer detector) */
  noteForward(member: string, timedOut: boolean, now: number): void;
}

/** Records kept for reuse; beyond this many forwards in flight, the extra records are left to the GC. */
const FORWARD_POOL = 4096;

/** One forward on its way to its owner: what its answer needs (ClusterDecider.onAnswer). */
interface Forward {
  query: LimitQuery;
  /** the wall clock the request was routed at (unix ms) */
  now: number;
  done: (decision: Decision) => boolean;
  owner: string;
  client: PeerClient;
  /** performance.now() when it was handed to the client */
  sentAt: number;
  stateKey: string;
  charge: boolean;
  /** whether a block answered to it may be remembered (BlockedCache) */
  cacheable: boolean;
  /** it asked for a grant of the key's window (OPENING) */
  opening: boolean;
}

function newForward(): Forward {
  return {
    query: undefined as unknown as LimitQuery,
    now: 0,
    done: undefined as unknown as Forward["done"],
    owner: "",
    client: undefined as unknown as PeerClient,
    sentAt: 0,
    stateKey: "",
    charge: false,
    cacheable: false,
    opening: false,
  };
}

/**
 * Front end → ownership rule → (local table | owning peer | fail open). Keys this node
 * may decide are decided here; the rest are forwarded, and a forward that fails or misses
 * its deadline becomes a fail-open answer, so a caller never waits longer than
 * PEER_TIMEOUT_MS for a dead owner.
 */
export class ClusterDecider implements Decider {
  private readonly cachedBlock: Decision = newDecision();
  /** An answer from this node's share of a key (leases/shares.ts), with the same validity as `forwarded`. */
  private readonly shared: Decision = newDecision();
  /** A forward's answer: valid only for the `done` call it is passed to (see Decider), so one object serves every forward. */
  private readonly forwarded: Decision = newDecision();
  /** A forward's applied limit, with the same validity as `forwarded`. */
  private readonly appliedScratch: AppliedLimit = { limit: 0, duration: 0, algorithm: undefined as unknown as Algorithm };
  /** Records of forwards answered, for the next ones. */
  private readonly forwards: Forward[] = [];

  constructor(
    private readonly view: ClusterView,
    private readonly local: LocalDecider,
    private readonly blocked: BlockedCache,
    private readonly metrics: ClusterMetrics,
    private readonly batches: BatchForwarder,
    /** deadline of a GIVE_BACK call (PEER_TIMEOUT_MS) */
    private readonly timeoutMs: number,
    /** shares of keys other members own (leases/): answered here, in the turn the request arrived */
    private readonly shares: Shares,
  ) {}

  /**
   * What decideSync found for a key it did not decide: the front end calls decide() for that
   * same query at once (same turn, so neither the ring nor the view has moved), and decide()
   * takes the ring key and verdict from here instead of building and hashing the key again.
   */
  private syncQuery: LimitQuery | undefined = undefined;
  private syncNow = 0;
  private syncRingKey = "";
  private syncVerdict: Ownership | undefined = undefined;
  /** the state key decideSync built to ask its share, "" when it did not */
  private syncStateKey = "";

  /**
   * Keys this node may decide now, and keys another member owns that this node's share of
   * them answers (leases/shares.ts), are answered at once; undefined means "use decide()".
   */
  decideSync(query: LimitQuery, now: number): Decision | undefined {
    const ringKey = ringKeyOf(query.namespace, query.identifier);
    const verdict = ownership(this.view, ringKey, query.algorithm.code, query.duration, now, "local");
    if (verdict.kind === "decide") return this.local.decideNow(query, ringKey, now);
    let stateKey = "";
    if (verdict.kind === "forward" && this.shares.shareable(query)) {
      stateKey = stateKeyOf(query.algorithm.code, query.duration, ringKey);
      const d = this.fromShare(query, stateKey, verdict.owner, now);
      if (d !== undefined) return d;
    }
    this.syncQuery = query;
    this.syncNow = now;
    this.syncRingKey = ringKey;
    this.syncVerdict = verdict;
    this.syncStateKey = stateKey;
    return undefined;
  }

  private fromShare(query: LimitQuery, stateKey: string, owner: string, now: number): Decision | undefined {
    const client = this.view.client(owner);
    if (client === undefined) return undefined;
    const d = this.shares.answer(query, stateKey, client, owner, now, this.shared);
    if (d !== undefined) this.metrics.forwardOutcome("shared");
    return d;
  }

  decide(query: LimitQuery, now: number, done: (decision: Decision) => boolean): void {
    let ringKey: string;
    let verdict: Ownership;
    /** decideSync asked the share already; "" when it did not (the key is built below) */
    let stateKey = "";
    const fromSync = this.syncQuery === query && this.syncNow === now && this.syncVerdict !== undefined;
    if (fromSync) {
      ringKey = this.syncRingKey;
      verdict = this.syncVerdict!;
      stateKey = this.syncStateKey;
    } else {
      ringKey = ringKeyOf(query.namespace, query.identifier);
      verdict = ownership(this.view, ringKey, query.algorithm.code, query.duration, now, "local");
    }
    this.syncQuery = undefined;
    this.syncVerdict = undefined;
    if (verdict.kind === "decide") {
      done(this.local.decideNow(query, ringKey, now));
      return;
    }
    // A remembered block is one for a request of 1 (a peek is blocked exactly then too);
    // a heavier request waits longer, so it asks the owner. A charge always reaches the owner.
    // Never for a concurrency key: a release on any member frees a slot at once, which a remembered 429 would hide.
    const charge = query.charge === true;
    const cacheable = query.cost <= 1 && !charge && query.algorithm !== concurrency;
    if (verdict.kind === "fail_open") {
      // The count is unknown here but not lower than a block this node holds: that block stands.
      const held =
        verdict.blockHeld === true && cacheable
          ? (this.cachedBlockOf(stateKeyOf(query.algorithm.code, query.duration, ringKey), query, now) ?? this.heldBlock(query, ringKey, now))
          : undefined;
      if (held !== undefined) {
        done(held);
        return;
      }
      if (verdict.reason === "peer_unavailable") this.metrics.forwardOutcome("unavailable");
      done(failOpenDecision(query, now, verdict.reason, newDecision()));
      return;
    }

    // decideSync built the state key only to ask the key's share.
    let shareAsked = stateKey !== "";
    if (stateKey === "") {
      stateKey = stateKeyOf(query.algorithm.code, query.duration, ringKey);
      // Not through decideSync (the RLS door): the share is asked here.
      if (!fromSync && this.shares.shareable(query)) {
        shareAsked = true;
        const d = this.fromShare(query, stateKey, verdict.owner, now);
        if (d !== undefined) {
          done(d);
          return;
        }
      }
    }
    const block = cacheable ? this.cachedBlockOf(stateKey, query, now) : undefined;
    if (block !== undefined) {
      done(block);
      return;
    }

    const client = this.view.client(verdict.owner);
    if (client === undefined) {
      this.metrics.forwardOutcome("unavailable");
      done(failOpenDecision(query, now, "peer_unavailable", newDecision()));
      return;
    }
    // A member of peer protocol 11 reads neither CHARGE nor REFUND (FEATURE_VERSIONS): a charge is
    // never sent it, and is answered as not counted (POST /limit/charge: 503) until it is upgraded.
    // Likewise a charge with an id, below 13 (CHARGE_ID): sent without it, it could be counted twice.
    if (charge && (!client.link.supports("CHARGE") || (query.chargeId !== undefined && !client.link.supports("CHARGE_ID")))) {
      this.metrics.forwardOutcome("unavailable");
      done(failOpenDecision(query, now, "peer_unavailable", newDecision()));
      return;
    }
    // A share that opened empty in this window asks for a grant with the decision (leases/shares.ts).
    const opening = shareAsked && this.shares.wantsOpening(stateKey, query.limit);
    const f = this.forwards.pop() ?? newForward();
    f.query = query;
    f.now = now;
    f.done = done;
    f.owner = verdict.owner;
    f.client = client;
    f.sentAt = performance.now();
    f.stateKey = stateKey;
    f.charge = charge;
    f.cacheable = cacheable;
    f.opening = opening;
    // The query itself crosses the peer boundary (a DecideQuery): nothing is unpacked or built for it.
    client.decide(query, this.onAnswerBound, opening && client.link.supports("OPENING") ? DecideItemFlag.OPENING : 0, f);
  }

  /** Bound once: every forward's answer comes here with its record (no closure per forward). */
  private readonly onAnswerBound = (err: PeerError | null, r: DecideResult | null, f: unknown): void => {
    const forward = f as Forward;
    try {
      this.onAnswer(err, r, forward);
    } finally {
      // Nothing of the request is kept past its answer: the record goes back to the pool empty.
      forward.query = undefined as unknown as LimitQuery;
      forward.done = undefined as unknown as Forward["done"];
      forward.client = undefined as unknown as PeerClient;
      if (this.forwards.length < FORWARD_POOL) this.forwards.push(forward);
    }
  };

  /** The owner's answer to one forward (or the error it failed with), turned into the caller's decision. */
  private onAnswer(err: PeerError | null, r: DecideResult | null, f: Forward): void {
    const { query, now, done, owner, client, charge } = f;
    const d = this.forwarded;
    if (err !== null || r === null || r.code === 2) {
      const reason = err !== null ? degradedReasonOf(err) : "peer_error";
      if (reason === "peer_timeout") this.view.noteForward(owner, true, now);
      this.metrics.forwardOutcome(reason === "peer_timeout" ? "timeout" : reason === "peer_unavailable" ? "unavailable" : "error");
      done(failOpenDecision(query, now, reason, d));
      return;
    }
    r.resetTime = resetTimeHere(r.resetTime, client.clockOffsetMs);
    // An answer that does not fit the question (a count beyond the limit, NaN, a reset
    // years ahead) is the owner's error for this item alone.
    if (!replyWithinContract(r, query, now)) {
      this.metrics.forwardOutcome("invalid");
      done(failOpenDecision(query, now, "peer_error", d));
      return;
    }
    this.metrics.observeForward(performance.now() - f.sentAt);
    this.view.noteForward(owner, false, now);
    if (r.granted > 0 && f.opening) this.shares.openingGranted(f.stateKey, query, r.grantWindowStart * 1000, r.granted, now, client);
    d.allowed = r.code === 0;
    // A charge past its limit carries its debt where `remaining` is (inbound.ts).
    d.debt = charge && !d.allowed ? r.remaining : 0;
    d.remaining = d.debt > 0 ? 0 : r.remaining;
    d.resetTime = r.resetTime;
    d.retryAfterMs = r.retryAfterMs;
    d.degraded = null;
    d.shadow = (r.flags & DecideFlag.SHADOW) !== 0;
    d.duplicate = (r.flags & DecideFlag.DUPLICATE) !== 0;
    if ((r.flags & DecideFlag.APPLIED) !== 0) {
      const a = this.appliedScratch;
      a.limit = r.limit;
      a.duration = r.duration;
      a.algorithm = algorithmByCode(r.algorithm)!;
      d.applied = a;
    } else d.applied = null;
    // A block under an override is not remembered: the cache answers with the asked limit, and
    // an operator's change must apply from the owner's next decision.
    // A charge that leaves no room blocks a request of 1 until retryAfterMs: remembered as such.
    const blocks = charge ? d.remaining === 0 && r.retryAfterMs > 0 : !d.allowed && f.cacheable;
    // A duplicate's answer is an earlier one's (its wait counted from then): not remembered.
    if (blocks && d.applied === null && !d.duplicate) this.blocked.remember(f.stateKey, query.limit, now, r.retryAfterMs, r.resetTime);
    this.metrics.forwardOutcome(d.allowed ? "allowed" : "blocked");
    // Shadow mode let a block through: nothing was counted. A charge reports what was
    // spent already: it stays counted whoever hears the answer.
    const counted = d.allowed && !d.shadow && query.cost > 0 && !charge;
    // Read before done(): the answer and its applied limit are reused by the next forward.
    const given = counted ? givenBackQuery(query, d.applied) : undefined;
    // The caller left while the answer was on its way (a closed connection, a pipelining
    // client uWebSockets.js cut off): what the owner counted for it is given back, so a
    // key's count holds only answers that were delivered.
    // Aged from when its frame left (it may have waited for the link), never less: the owner
    // gives back only into a state and window that held it then (inbound-batch.ts).
    const left = client.answerSentAt;
    if (!done(d) && given !== undefined) this.giveBack(client, given, left >= f.sentAt ? left : f.sentAt);
  }

  /** The owner's 429 this node remembers for the key, as this request's answer; undefined when none. */
  private cachedBlockOf(stateKey: string, query: LimitQuery, now: number): Decision | undefined {
    const block = this.blocked.get(stateKey, query.limit, now);
    if (block === undefined) return undefined;
    this.metrics.forwardOutcome("cached_block");
    const d = this.cachedBlock;
    d.allowed = false;
    d.remaining = 0;
    d.resetTime = block.resetTime;
    d.retryAfterMs = block.until - now;
    d.degraded = null;
    d.applied = null;
    d.shadow = false;
    return d;
  }

  /**
   * A block this node's own table holds for the key (a copy promoted from the owner, a state
   * counted here earlier), asked without counting (a peek); undefined when it would allow.
   */
  private heldBlock(query: LimitQuery, ringKey: string, now: number): Decision | undefined {
    const d = this.local.decideItem(
      query.namespace,
      query.identifier,
      ringKey,
      query.algorithm,
      query.limit,
      query.duration,
      now,
      0,
      query.overridable === true,
      false,
    );
    return d.allowed ? undefined : d;
  }

  /**
   * Ask the owner to give back an allowed decision nobody received. Not waited for, and
   * best effort: if it is lost, the decision stays counted, as before (never over-admits).
   */
  private giveBack(client: PeerClient, query: LimitQuery, sentAt: number): void {
    this.metrics.givenBack++;
    client.call(CallMethod.GIVE_BACK, encodeGiveBack(performance.now() - sentAt, query), this.timeoutMs).catch(() => {});
  }

  /** See BatchForwarder: one owner decides in one step, several reserve then commit or release. */
  decideBatch(queries: readonly LimitQuery[], now: number, done: (outcome: BatchOutcome) => void): void {
    this.batches.decideBatch(queries, now, done);
  }

  /** Freed on the key's owner, never from a share or a cache (docs/api.md, POST /limit/release). */
  release(rq: ReleaseQuery, now: number, done: (outcome: ReleaseOutcome) => void): void {
    const q = rq.query;
    const verdict = ownership(this.view, ringKeyOf(q.namespace, q.identifier), q.algorithm.code, q.duration, now, "local");
    if (verdict.kind === "decide") return done(this.local.releaseSync(rq, now));
    if (verdict.kind === "fail_open") return done({ ok: false, reason: verdict.reason });
    const client = this.view.client(verdict.owner);
    // A member of 11 knows no RELEASE (FEATURE_VERSIONS): nothing freed, the slot lapses on time.
    if (client === undefined || !client.link.supports("RELEASE")) return done({ ok: false, reason: "peer_unavailable" });
    client.call(CallMethod.RELEASE, encodeRelease(rq), this.timeoutMs).then(
      (reply) => {
        let outcome: ReleaseOutcome;
        try {
          outcome = decodeReleaseReply(reply);
        } catch {
          outcome = { ok: false, reason: "peer_error" };
        }
        done(outcome);
      },
      (err: unknown) => done({ ok: false, reason: degradedReasonOf(err) }),
    );
  }

  /** Routed to the identifier's owner (BatchForwarder.reset). */
  reset(query: ResetQuery, now: number, done: (outcome: ResetOutcome) => void): void {
    this.batches.reset(query, now, done);
  }
}

/**
 * What a give-back names: the state the owner counted in, which is the applied limit's
 * when an override applied (another window or algorithm is another state). Built only for
 * an allowed, counted forward.
 */
function givenBackQuery(query: LimitQuery, applied: AppliedLimit | null): LimitQuery {
  if (applied === null) return query;
  return {
    namespace: query.namespace,
    identifier: query.identifier,
    limit: applied.limit,
    duration: applied.duration,
    algorithm: applied.algorithm,
    cost: query.cost,
  };
}

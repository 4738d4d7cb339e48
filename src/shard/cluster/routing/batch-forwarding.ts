import {
  failOpenBatch,
  failOpenDecision,
  newDecision,
  type BatchOutcome,
  type Decision,
  type DegradedReason,
  type LimitQuery,
  type ResetOutcome,
  type ResetQuery,
} from "../../../decision.js";
import type { PeerClient } from "../../../peer/index.js";
import { decideBatchOn } from "../../local/batch.js";
import { itemPoliciesOf } from "../../local/item-policy.js";
import type { LocalDecider } from "../../local/local-decider.js";
import { ringKeyOf, stateKeyOf } from "../../ring/state-key.js";
import type { BlockedCache } from "./blocked-cache.js";
import {
  BatchMode,
  MAX_HOLD_MS,
  decodeBatchReply,
  decodeRemoved,
  encodeBatchRequest,
  encodeReservation,
  encodeResetRequest,
  type BatchReply,
} from "../wire/batch-wire.js";
import { CallMethod } from "../wire/call-methods.js";
import { degradedReasonOf } from "./degraded-reason.js";
import { ownership, type OwnershipView } from "./ownership.js";
import { resetTimeHere } from "../wire/peer-data.js";

/** The cluster as batches see it (ClusterDecider's view). */
interface ClusterView extends OwnershipView {
  client(member: string): PeerClient | undefined;
}

/**
 * How long an owner holds a reservation its coordinator has not confirmed: commit or
 * release follows within one call's deadline, so this is a wide margin that still gives a
 * lost batch's counts back within seconds.
 */
export function batchHoldMs(peerTimeoutMs: number): number {
  return Math.min(MAX_HOLD_MS, Math.max(2000, 20 * peerTimeoutMs));
}

/** One owner's share of a batch: the items' positions in the batch, and their queries. */
interface Part {
  owner: string;
  positions: number[];
  queries: LimitQuery[];
  ringKeys: string[];
}

type PartResult = { ok: true; reply: BatchReply } | { ok: false; reason: DegradedReason };

/**
 * Batches and resets on a cluster (docs/api.md, "Batches across owners"):
 *
 * - Items go to their owners, grouped: the items of one identifier always share an owner
 *   and are decided together by it, in one synchronous step.
 * - A batch on one owner is decided there in one step (this node, or one BATCH call).
 * - A batch across owners is reserved on each (a reservation counts at once, so no
 *   interleaving can over-admit), then committed everywhere when every owner allowed its
 *   part, or released everywhere otherwise. A failed or late owner fails the whole batch
 *   open (`degraded`) and what the others reserved is released; an owner that never hears
 *   back releases on its own when the hold runs out (one coarse sweep, no timer per key).
 */
export class BatchForwarder {
  private nextReservation = 1;

  constructor(
    private readonly view: ClusterView,
    private readonly local: LocalDecider,
    /** deadline of one BATCH or RESET call */
    private readonly timeoutMs: number,
    /** how long an owner holds an unconfirmed reservation */
    private readonly holdMs: number,
    /** after a reset here, as the owner: tell the other members (ResetNotices.announce) */
    private readonly afterReset: (ringKey: string) => Promise<void> = () => Promise.resolve(),
    /** this node's memory of the owners' 429s (ClusterDecider's): an item it holds blocked blocks a batch whose owner did not answer */
    private readonly blocked?: BlockedCache,
  ) {}

  decideBatch(queries: readonly LimitQuery[], now: number, done: (outcome: BatchOutcome) => void): void {
    const parts = new Map<string, Part>();
    for (let i = 0; i < queries.length; i++) {
      const q = queries[i]!;
      const ringKey = ringKeyOf(q.namespace, q.identifier);
      const verdict = ownership(this.view, ringKey, q.algorithm.code, q.duration, now, "local");
      if (verdict.kind === "fail_open") return done(failOpenBatch(queries, now, verdict.reason));
      const owner = verdict.kind === "decide" ? this.view.self : verdict.owner;
      let part = parts.get(owner);
      if (part === undefined) parts.set(owner, (part = { owner, positions: [], queries: [], ringKeys: [] }));
      part.positions.push(i);
      part.queries.push(q);
      part.ringKeys.push(ringKey);
    }
    if (parts.size === 1) {
      const part = parts.values().next().value!;
      if (part.owner === this.view.self) return this.local.decideBatch(queries, now, done);
      this.send(part, BatchMode.DECIDE, 0).then((r) =>
        done(r.ok ? { decisions: r.reply.decisions, degraded: null } : this.withoutOwners(queries, parts, [r], r.reason, now)),
      );
      return;
    }

    const reservation = this.nextReservation;
    this.nextReservation = (reservation + 1) >>> 0 || 1;
    const results = [...parts.values()].map((part) =>
      part.owner === this.view.self ? Promise.resolve(this.reserveHere(part, reservation, now)) : this.send(part, BatchMode.RESERVE, reservation),
    );
    void Promise.all(results).then((settled) => {
      const failed = settled.find((r): r is { ok: false; reason: DegradedReason } => !r.ok);
      const allowed = failed === undefined && settled.every((r) => r.ok && r.reply.allowed);
      for (const part of parts.values()) this.finish(part.owner, reservation, allowed);
      if (failed !== undefined) return done(this.withoutOwners(queries, parts, settled, failed.reason, now));
      const decisions: Decision[] = new Array(queries.length);
      [...parts.values()].forEach((part, p) => {
        const r = (settled[p] as { ok: true; reply: BatchReply }).reply;
        // Refused as a whole: nothing stays counted, so items show the state as it stands.
        const shown = allowed ? r.decisions : r.standing;
        part.positions.forEach((at, k) => (decisions[at] = shown[k]!));
      });
      done({ decisions, degraded: null });
    });
  }

  /**
   * A batch some of whose owners did not answer (docs/api.md, "Batches across owners"): an
   * item blocked on an owner that did answer, or by a block this node remembers, refuses the
   * batch (429, nothing counted: the other owners' reservations are released); only when no
   * item is known to be blocked does the batch fail open. The unknown items of a refused
   * batch are shown as their fail-open answers would be.
   */
  private withoutOwners(queries: readonly LimitQuery[], parts: Map<string, Part>, settled: PartResult[], reason: DegradedReason, now: number): BatchOutcome {
    const decisions: Decision[] = new Array(queries.length);
    let blocked = false;
    [...parts.values()].forEach((part, p) => {
      const r = settled[p]!;
      part.positions.forEach((at, k) => {
        const q = part.queries[k]!;
        let d: Decision | undefined = r.ok ? r.reply.standing[k] : undefined;
        const block = !r.ok && q.cost <= 1 ? this.blocked?.get(stateKeyOf(q.algorithm.code, q.duration, part.ringKeys[k]!), q.limit, now) : undefined;
        if (block !== undefined) {
          d = newDecision();
          d.resetTime = block.resetTime;
          d.retryAfterMs = block.until - now;
        }
        if (d !== undefined && !d.allowed) blocked = true;
        decisions[at] = d ?? failOpenDecision(q, now, reason, newDecision());
      });
    });
    return blocked ? { decisions, degraded: null } : failOpenBatch(queries, now, reason);
  }

  /** Send RESET to the identifier's owner, or reset here when this node owns it. */
  reset(query: ResetQuery, now: number, done: (outcome: ResetOutcome) => void): void {
    const ringKey = ringKeyOf(query.namespace, query.identifier);
    const owner = this.view.ring.owner(ringKey);
    if (owner === undefined || owner === this.view.self) {
      if (this.view.frozen) return done({ ok: false, reason: "handoff" });
      return this.local.reset(query, now, (outcome) => void this.afterReset(ringKey).then(() => done(outcome)));
    }
    const client = this.view.client(owner);
    if (client === undefined) return done({ ok: false, reason: "peer_unavailable" });
    client.call(CallMethod.RESET, encodeResetRequest(query), this.timeoutMs).then(
      (reply) => {
        try {
          done({ ok: true, removed: decodeRemoved(reply) });
        } catch {
          done({ ok: false, reason: "peer_error" });
        }
      },
      (err: unknown) => done({ ok: false, reason: degradedReasonOf(err) }),
    );
  }

  /** This node's part of a batch across owners: counted now, held like a remote owner's. */
  private reserveHere(part: Part, reservation: number, now: number): PartResult {
    const { policy, shadowMode } = this.local.policyInForce;
    const r = decideBatchOn(
      this.local.table,
      this.local.sharers,
      part.queries,
      part.ringKeys,
      now,
      true,
      true,
      itemPoliciesOf(policy, shadowMode, part.queries),
    );
    if (r.allowed) this.local.reservations.hold(this.reservationId(this.view.self, reservation), r.counted, now + this.holdMs);
    return { ok: true, reply: { allowed: r.allowed, decisions: r.decisions, standing: r.standing ?? r.decisions } };
  }

  private send(part: Part, mode: number, reservation: number): Promise<PartResult> {
    const client = this.view.client(part.owner);
    if (client === undefined) return Promise.resolve({ ok: false, reason: "peer_unavailable" });
    return client.call(CallMethod.BATCH, encodeBatchRequest(mode, reservation, this.holdMs, part.queries), this.timeoutMs).then(
      (payload): PartResult => {
        try {
          const reply = decodeBatchReply(payload, part.queries);
          // Reset times are the owner's clock readings: on this node's, as for one forward.
          for (const d of [...reply.decisions, ...reply.standing]) d.resetTime = resetTimeHere(d.resetTime, client.clockOffsetMs);
          return { ok: true, reply };
        } catch {
          return { ok: false, reason: "peer_error" };
        }
      },
      (err: unknown): PartResult => ({ ok: false, reason: degradedReasonOf(err) }),
    );
  }

  /**
   * Commit or release one owner's reservation. Sent to every owner, whatever it answered:
   * on one connection frames arrive in order, so a release reaches an owner after the
   * BATCH it answers, even one whose reply came too late; an owner that had nothing to
   * keep ignores it. Not waited for: an owner that misses it releases at the hold's end.
   */
  private finish(owner: string, reservation: number, commit: boolean): void {
    if (owner === this.view.self) {
      const id = this.reservationId(owner, reservation);
      if (commit) this.local.reservations.commit(id);
      else this.local.reservations.release(id, Date.now());
      return;
    }
    const client = this.view.client(owner);
    if (client === undefined) return;
    client.call(commit ? CallMethod.BATCH_COMMIT : CallMethod.BATCH_RELEASE, encodeReservation(reservation), this.timeoutMs).catch(() => {});
  }

  /** An owner names a reservation by the node that asked for it and its number (inbound-calls.ts). */
  private reservationId(coordinator: string, reservation: number): string {
    return `${coordinator}/${reservation}`;
  }
}

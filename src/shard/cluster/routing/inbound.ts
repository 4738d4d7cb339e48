import { algorithmByCode } from "../../../algorithms/index.js";
import { fixedWindowStart } from "../../../algorithms/fixed-window.js";
import { DecideCode, DecideFlag, type DecideQuery, type DecideResult, type PeerServerHandler } from "../../../peer/index.js";
import type { LocalDecider } from "../../local/local-decider.js";
import { ringKeyOf } from "../../ring/state-key.js";
import { decodeRelease, encodeReleaseReply } from "../wire/release-wire.js";
import { CallMethod, decodeStates, mergeStates, type StateRecord } from "../wire/call-methods.js";
import { onBatchCall } from "./inbound-batch.js";
import { decodeResetRequest } from "../wire/batch-wire.js";
import { ownership, type FailOpen, type OwnershipView } from "./ownership.js";
import { admitState, forwardedWithinContract } from "../wire/peer-data.js";
import { decodeLeaseRequest, encodeLeaseReply } from "../wire/lease-wire.js";
import { grantShare, openingGrant } from "../leases/grants.js";
import { isChargeId } from "../../../decision.js";

/** What inbound requests change elsewhere in the cluster. */
export interface InboundEvents {
  /** a forwarded key was decided here although this node's ring gives it to another member */
  strayState(): void;
  /** LEAVE: `member` (the sender itself) is leaving and drops out of the ring */
  memberLeaving(member: string, from: string): void;
  /** MERGE_STATES from `from` held `count` records out of bounds, not merged */
  statesRefused(from: string, count: number): void;
  /** HANDOFF_DONE: `from` has handed this node every state that moved to it */
  handoffDone(from: string): void;
  /** ADVERTISE: `from` tells its client-facing URL; the reply is this node's */
  advertise(payload: Buffer, from: string): Promise<Buffer>;
  /** a member (re)started and reached this node */
  peerAuthenticated(member: string): void;
  /** an authenticated connection of `member` closed */
  peerClosed(member: string): void;
  /** HOLD from `member`: the reply (leases/holders.ts) */
  hold(member: string): Buffer;
  /** RESET: this node reset `ringKey` as its owner; resolves when the other members have dropped their blocks of it */
  resetApplied(ringKey: string): Promise<void>;
  /** RESET_NOTICE: the owner of a ring key reset it */
  resetNotice(payload: Buffer, from: string): void;
  /** DEBT_NOTICE: the owner of a shared key charged it past its limit (leases/debt-notices.ts) */
  debtNotice(payload: Buffer, from: string): void;
  /** TOP: this node's identifiers blocked most, as GET /top asks a member (top-offenders.ts) */
  top(payload: Buffer): Buffer;
  /** REPLICATE: states their owner sent to keep as replicas; returns how many were kept (throws when this node keeps none) */
  replicate(payload: Buffer, from: string): number;
}

/**
 * What peers ask of this node: forwarded decisions (DECIDE) and the cold-path CALLs of the
 * hand-off. Peer data is validated like callers' data: a forwarded decision outside the
 * request contract is refused (that item only), a state batch that cannot be parsed is
 * refused whole, and a state record out of bounds is refused alone (peer-data.ts).
 */
export class InboundHandler implements PeerServerHandler {
  constructor(
    private readonly view: OwnershipView,
    private readonly local: LocalDecider,
    private readonly events: InboundEvents,
  ) {}

  /**
   * A throw answers this item with an error: the forwarding node fails open. The item's
   * algorithm code is resolved here, in the registry. `now`: unix ms, read once per DECIDE
   * frame by the peer server.
   */
  decide(query: DecideQuery, out: DecideResult, now: number): void {
    const { namespace, identifier, limit, duration, cost } = query;
    const overridable = query.overridable === true;
    const algorithm = algorithmByCode(query.algorithm.code);
    const charge = query.charge === true;
    const chargeId = query.chargeId;
    // A peer's charge id is held to the caller's rule (REQUEST_BOUNDS.chargeId), like every other field.
    if (
      algorithm === undefined ||
      !forwardedWithinContract(limit, duration, cost, namespace, identifier, charge, overridable) ||
      (chargeId !== undefined && (!charge || !isChargeId(chargeId)))
    )
      throw new RangeError("forwarded decision out of contract");
    const ringKey = ringKeyOf(namespace, identifier);
    const verdict = ownership(this.view, ringKey, algorithm.code, duration, now, "forwarded");
    // Not decided here; but a block this node holds stands (a peek: nothing counted), else the sender fails open.
    const held = verdict.kind === "fail_open" && verdict.blockHeld === true && cost <= 1 && !charge;
    if (verdict.kind !== "decide" && !held) throw new Error(verdict.kind === "fail_open" ? verdict.why : "not decided here");
    if (verdict.kind === "decide" && verdict.stray) this.events.strayState();
    // Decided with this owner's policy: the override applied, and shadow, travel back with the answer.
    const d =
      chargeId !== undefined && verdict.kind === "decide"
        ? this.local.decideOnce(namespace, identifier, ringKey, algorithm, limit, duration, now, cost, overridable, chargeId)
        : this.local.decideItem(namespace, identifier, ringKey, algorithm, limit, duration, now, held ? 0 : cost, overridable, charge);
    if (held && d.allowed) throw new Error((verdict as FailOpen).why);
    // Its id did not fit the owner's memory: refused, not counted (the sender answers 503).
    if (d.degraded !== null) throw new Error("charge id memory full");
    out.code = d.allowed ? DecideCode.ALLOWED : DecideCode.BLOCKED;
    // A charge past its limit: its debt, where `remaining` (0 then) would be.
    out.remaining = d.allowed ? d.remaining : Math.min(d.debt, 0xffffffff);
    out.resetTime = d.resetTime;
    out.retryAfterMs = d.retryAfterMs;
    const applied = d.applied;
    out.flags =
      (applied !== null ? DecideFlag.APPLIED : 0) |
      (d.shadow ? DecideFlag.SHADOW : 0) |
      (chargeId !== undefined && d.duplicate === true ? DecideFlag.DUPLICATE : 0);
    if (applied !== null) {
      out.limit = applied.limit;
      out.duration = applied.duration;
      out.algorithm = applied.algorithm.code;
    }
    // The sender's share opened empty: a grant of the window goes back with a counted answer
    // (none for a stray's count, nor where this owner's policy changed or shadowed the limit).
    if (query.opening === true && !charge && verdict.kind === "decide" && !verdict.stray && d.allowed && !d.shadow && applied === null && cost > 0) {
      const grant = openingGrant(this.local, { namespace, identifier, algorithm, limit, duration, cost, overridable }, ringKey, now, this.view.ring.size);
      out.granted = grant.granted;
      out.grantWindowStart = grant.windowStart / 1000;
    }
  }

  async call(method: number, payload: Buffer, from: string): Promise<Buffer> {
    switch (method) {
      case CallMethod.LEAVE: {
        // The handshake binds `from`: a member may take only itself out of the ring.
        const member = payload.toString("utf8");
        if (member !== from) throw new Error("a member may announce only its own leave");
        this.events.memberLeaving(member, from);
        return Buffer.alloc(0);
      }
      case CallMethod.MERGE_STATES: {
        // Leaving: whatever arrived now would be stranded here when this process exits.
        // Refused, the sender merges the batch back into its own table.
        if (this.view.frozen) throw new Error("leaving: not accepting states");
        const now = Date.now();
        const admitted: StateRecord[] = [];
        let refused = 0;
        for (const r of decodeStates(payload)) {
          // Sent with ages: put on this node's clock here, whatever the sender's reads.
          const state = admitState(r.key, r.state, now);
          if (typeof state === "object") admitted.push({ key: r.key, state });
          else if (state === "invalid") refused++; // an expired state is equivalent to none: dropped quietly
        }
        if (refused > 0) this.events.statesRefused(from, refused);
        const n = mergeStates(this.local.table, admitted, now);
        const reply = Buffer.alloc(4);
        reply.writeUInt32BE(n, 0);
        return reply;
      }
      case CallMethod.HANDOFF_DONE:
        this.events.handoffDone(from);
        return Buffer.alloc(0);
      case CallMethod.ADVERTISE:
        return this.events.advertise(payload, from);
      case CallMethod.TOP:
        return this.events.top(payload);
      case CallMethod.REPLICATE: {
        const reply = Buffer.alloc(4);
        reply.writeUInt32BE(this.events.replicate(payload, from), 0);
        return reply;
      }
      case CallMethod.RESET: {
        const reply = await onBatchCall(method, payload, from, this.view, this.local, this.local.reservations);
        const q = decodeResetRequest(payload);
        await this.events.resetApplied(ringKeyOf(q.namespace, q.identifier));
        return reply;
      }
      case CallMethod.LEASE: {
        const now = Date.now();
        const q = decodeLeaseRequest(payload);
        const ringKey = ringKeyOf(q.namespace, q.identifier);
        // Granted only by the key's owner on this node's ring too: a stray's count is not the one that holds.
        const verdict = ownership(this.view, ringKey, q.algorithm.code, q.duration, now, "forwarded");
        const grant = verdict.kind === "decide" && !verdict.stray ? grantShare(this.local, q, ringKey, now, this.view.ring.size) : undefined;
        return encodeLeaseReply(grant?.granted ?? 0, grant?.windowStart ?? fixedWindowStart(now, q.duration * 1000));
      }
      case CallMethod.HOLD:
        return this.events.hold(from);
      case CallMethod.RELEASE: {
        const now = Date.now();
        const rq = decodeRelease(payload);
        // Freed only by the key's owner: elsewhere the caller gets a peer error (503) and may retry.
        const verdict = ownership(this.view, ringKeyOf(rq.query.namespace, rq.query.identifier), rq.query.algorithm.code, rq.query.duration, now, "forwarded");
        if (verdict.kind !== "decide") throw new Error(verdict.kind === "fail_open" ? verdict.why : "not the owner");
        return encodeReleaseReply(this.local.releaseSync(rq, now));
      }
      case CallMethod.RESET_NOTICE:
        this.events.resetNotice(payload, from);
        return Buffer.alloc(0);
      case CallMethod.DEBT_NOTICE:
        this.events.debtNotice(payload, from);
        return Buffer.alloc(0);
      case CallMethod.BATCH:
      case CallMethod.BATCH_COMMIT:
      case CallMethod.BATCH_RELEASE:
      case CallMethod.GIVE_BACK:
        return onBatchCall(method, payload, from, this.view, this.local, this.local.reservations);
      default:
        throw new Error(`unknown call method ${method}`);
    }
  }

  onPeerAuthenticated(nodeId: string): void {
    this.events.peerAuthenticated(nodeId);
  }

  onPeerClosed(nodeId: string): void {
    this.events.peerClosed(nodeId);
  }
}

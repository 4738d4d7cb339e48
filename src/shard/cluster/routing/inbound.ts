import { algorithmByCode } from "../../../algorithms/index.js";
import { DecideCode, DecideFlag, type DecideQuery, type DecideResult, type PeerServerHandler } from "../../../peer/index.js";
import type { LocalDecider } from "../../local/local-decider.js";
import { ringKeyOf } from "../../ring/state-key.js";
import { answerCall, type InboundEvents } from "./inbound-calls.js";
import { ownership, type FailOpen, type OwnershipView } from "./ownership.js";
import { forwardedWithinContract } from "../wire/peer-data.js";
import { openingGrant } from "../leases/grants.js";
import { isChargeId } from "../../../decision.js";

export type { InboundEvents } from "./inbound-calls.js";

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

  /** The cold-path CALLs: one table of methods (inbound-calls.ts). */
  call(method: number, payload: Buffer, from: string): Promise<Buffer> {
    return answerCall(method, payload, { view: this.view, local: this.local, events: this.events, from });
  }

  onPeerAuthenticated(nodeId: string): void {
    this.events.peerAuthenticated(nodeId);
  }

  onPeerClosed(nodeId: string): void {
    this.events.peerClosed(nodeId);
  }
}

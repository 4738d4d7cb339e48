import { decideBatchOn } from "../../local/batch.js";
import { itemPoliciesOf } from "../../local/item-policy.js";
import type { LocalDecider } from "../../local/local-decider.js";
import { giveBack, type Reservations } from "../../local/reservations.js";
import { ringKeyOf, stateKeyOf } from "../../ring/state-key.js";
import { BatchMode, decodeBatchRequest, decodeGiveBack, decodeReservation, decodeResetRequest, encodeBatchReply, encodeRemoved } from "../wire/batch-wire.js";
import { CallMethod } from "../wire/call-methods.js";
import { ownership, type OwnershipView } from "./ownership.js";

/**
 * The owner's side of batches and resets sent by peers (docs/api.md). A batch part is
 * decided in one synchronous step against this node's table; if any of its keys may not
 * be decided here now (moved, joining, leaving) the call fails and the coordinator fails
 * the batch open. Reservations are named by the coordinator: `from/number`.
 */
export function onBatchCall(
  method: number,
  payload: Buffer,
  from: string,
  view: OwnershipView,
  local: LocalDecider,
  reservations: Reservations,
): Buffer | Promise<Buffer> {
  const now = Date.now();
  switch (method) {
    case CallMethod.BATCH: {
      const request = decodeBatchRequest(payload);
      const ringKeys = request.queries.map((q) => ringKeyOf(q.namespace, q.identifier));
      request.queries.forEach((q, i) => {
        const verdict = ownership(view, ringKeys[i]!, q.algorithm.code, q.duration, now, "forwarded");
        if (verdict.kind !== "decide") throw new Error(verdict.kind === "fail_open" ? verdict.why : "not decided here");
      });
      const reserve = request.mode === BatchMode.RESERVE;
      // The owner's policy: each item gets its override here, whoever coordinates the batch.
      const { policy, shadowMode } = local.policyInForce;
      const r = decideBatchOn(local.table, local.sharers, request.queries, ringKeys, now, true, reserve, itemPoliciesOf(policy, shadowMode, request.queries));
      if (reserve && r.allowed) reservations.hold(`${from}/${request.reservation}`, r.counted, now + request.holdMs);
      return encodeBatchReply(r.allowed, r.decisions, r.standing);
    }
    case CallMethod.BATCH_COMMIT:
      reservations.commit(`${from}/${decodeReservation(payload)}`);
      return Buffer.alloc(0);
    case CallMethod.BATCH_RELEASE:
      reservations.release(`${from}/${decodeReservation(payload)}`, now);
      return Buffer.alloc(0);
    case CallMethod.GIVE_BACK: {
      // Counted at most ageMs ago on this clock: the earliest moment is taken, so a window that
      // turned meanwhile is left as it is (never given back from a window it was not counted in).
      const { ageMs, query: q } = decodeGiveBack(payload);
      giveBack(local.table, stateKeyOf(q.algorithm.code, q.duration, ringKeyOf(q.namespace, q.identifier)), q.algorithm.code, q.duration, q.cost, now - ageMs, now);
      return Buffer.alloc(0);
    }
    case CallMethod.RESET: {
      if (view.frozen) throw new Error("leaving: this node's states are moving");
      const q = decodeResetRequest(payload);
      // Through the reset queue: a storm of resets from peers waits its turn like one from callers.
      return new Promise((resolve) =>
        local.resets.submit(ringKeyOf(q.namespace, q.identifier), q.algorithm, q.duration, (removed) => resolve(encodeRemoved(removed))),
      );
    }
    default:
      throw new Error(`unknown call method ${method}`);
  }
}

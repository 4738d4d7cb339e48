import { concurrency } from "../algorithms/concurrency.js";
import type { Decider } from "../decision.js";
import { COUNTED, NO_RULE, type Item } from "./descriptor-item.js";
import type { RlsDescriptor } from "./wire/messages.js";

/*
 * Concurrency over RLS (docs/envoy.md, Concurrency): a rule with `algorithm: concurrency`
 * holds a slot per hit, and Envoy's stream-done call (`apply_on_stream_done` with
 * `is_negative_hits` on the descriptor) gives the hits back. RLS names no lease, so a
 * give-back frees the key's oldest held slots, as many as its hits, on the key's owner. A
 * gateway that never sends it leaves each slot held until its lease (the rule's window)
 * lapses.
 */

/** Whether descriptor `d`, planned as `item`, gives back concurrency slots; if so the item is answered OK and counts nothing. */
export function givesBackSlots(d: RlsDescriptor, item: Item): boolean {
  if (d.is_negative_hits !== true || item.kind !== COUNTED || item.query!.algorithm !== concurrency) return false;
  item.kind = NO_RULE;
  // As many slots as the hits, which a refund carries negative.
  item.query!.cost = Math.abs(item.query!.cost);
  return true;
}

/** Free the oldest slots of each item's key on its owner; `then` once all are done (a failed one frees nothing: its slots lapse on time). */
export function releaseOldest(decider: Decider, items: readonly Item[], now: number, then: () => void): void {
  let pending = items.length;
  for (const item of items) {
    decider.release({ query: item.query!, lapseS: 0, leaseId: "", renew: false }, now, () => {
      if (--pending === 0) then();
    });
  }
}

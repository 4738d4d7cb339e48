import type { DegradedReason } from "../../../decision.js";
import { PeerError } from "../../../peer/index.js";

/**
 * The degraded reason of a request whose owner the peer channel did not answer for
 * (docs/operations.md, "What degraded means"): the one map, for forwards, batches and resets.
 *
 * - `timeout`: the owner did not answer by the deadline → `peer_timeout`.
 * - `unavailable`, `closed`: there is no connection to the owner: down, still connecting, or
 *   its client closed because the member left this node's list or the node is stopping. The
 *   owner was never asked → `peer_unavailable`.
 * - anything else (`remote`, `protocol`, `invalid`, `too_large`, a reply that cannot be
 *   read): the owner or the exchange went wrong → `peer_error`.
 */
export function degradedReasonOf(err: unknown): DegradedReason {
  if (!(err instanceof PeerError)) return "peer_error";
  switch (err.code) {
    case "timeout":
      return "peer_timeout";
    case "unavailable":
    case "closed":
      return "peer_unavailable";
    default:
      return "peer_error";
  }
}

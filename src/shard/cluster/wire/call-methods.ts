import { encodeStates, decodeStates, recordBytes, type StateRecord } from "../../records/state-records.js";
import { mergeStates } from "../../records/merge-states.js";

export { encodeStates, decodeStates, recordBytes, mergeStates, type StateRecord };

/** Peer-channel CALL methods of the cold path. */
export const CallMethod = Object.freeze({
  /** payload: the leaving member's ring name (UTF-8). Receivers drop it from their ring at once. */
  LEAVE: 1,
  /** payload: state records with ages (shard/records/state-records.ts); receivers merge each into their table (shard/records/merge-states.ts). Reply: u32 records merged. */
  MERGE_STATES: 2,
  /** empty: the sender has handed the receiver every state that moved to it when the sender added it to its ring. */
  HANDOFF_DONE: 3,
  /** payload: the sender's client-facing URL (UTF-8, may be empty). Reply: the receiver's (docs/client.md). */
  ADVERTISE: 4,
  /** payload: state records with ages the sender owns, for the receiver to keep as replicas (replicator.ts). Reply: u32 records kept. */
  REPLICATE: 5,
  /** payload: a batch or one owner's part of it (batch-wire.ts). Reply: a decision per item. */
  BATCH: 10,
  /** payload: u32 reservation. Keep what that reservation counted. */
  BATCH_COMMIT: 11,
  /** payload: u32 reservation. Give back what it counted. */
  BATCH_RELEASE: 12,
  /** payload: the states of one identifier to remove. Reply: those removed. */
  RESET: 13,
  /**
   * payload: u32 ms since the sender sent the decision, then its query as a one-item BATCH
   * body. The owner gives back what that forwarded decision counted: its caller left before
   * the answer was written. No reply body.
   */
  GIVE_BACK: 14,
  /** payload: a ring key (UTF-8) its owner has just reset. Receivers drop their cached blocks of it (routing/reset-notices.ts). No reply body. */
  RESET_NOTICE: 16,
  /** payload: what GET /top asks (top-wire.ts). Reply: this member's identifiers blocked most that the filter admits. */
  TOP: 15,
  /**
   * payload: a key's query whose share runs low on the sender, `cost` the requests wanted
   * (lease-wire.ts). The owner counts what it grants at once. Reply: u32 granted, f64 window start.
   */
  LEASE: 17,
  /**
   * Empty payload (protocol 12): may the sender answer shares by rule of the receiver's keys?
   * The receiver, yes, holds back a share for it in every window from now on while its
   * connection is open (leases/holders.ts). Reply: u8 1 yes / 0 no, u8 members held back for.
   */
  HOLD: 18,
  /** payload: a concurrency lease to free on its owner (release-wire.ts), protocol 12 (feature RELEASE). Reply: released, a renewal's lapse, remaining. */
  RELEASE: 19,
  /**
   * payload: f64 a window's start (unix ms, the owner's clock), then a state key (UTF-8) that
   * a charge took past its limit in that window (lease-wire.ts), protocol 12 (feature CHARGE).
   * Receivers answer nothing of it from their shares until the window ends (docs/shares.md, Debt). No reply body.
   */
  DEBT_NOTICE: 20,
});

/** A batch is cut at this size (plus one record), within the peer channel's 512 KiB frame limit. */
export const MAX_BATCH_BYTES = 256 * 1024;

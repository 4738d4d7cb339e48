import type { ProtocolFeature } from "../../../peer/index.js";
import { encodeStates, decodeStates, recordBytes, type StateRecord } from "../../records/state-records.js";
import { mergeStates } from "../../records/merge-states.js";
import { decodeBatchRequest, decodeGiveBack, decodeReservation, decodeResetRequest } from "./batch-wire.js";
import { decodeDebtNotice, decodeLeaseRequest } from "./lease-wire.js";
import { decodeTopRequest } from "./top-wire.js";
import { decodeRelease } from "./release-wire.js";
import { decodeReplicatedWithFine, decodeStatesWithFine } from "../../records/fine-records.js";

export { encodeStates, decodeStates, recordBytes, mergeStates, type StateRecord };

/** The payload as it came: the receiving service reads it itself (the decoder it names in `payload`). */
const raw = (payload: Buffer): Buffer => payload;
/** An empty payload: whatever a sender put in it is not read. */
const empty = (): null => null;
const utf8 = (payload: Buffer): string => payload.toString("utf8");

/**
 * One row per CALL method of the peer channel (docs/peer-protocol.md, "CALL methods"): its
 * number on the wire, the protocol feature a sender must see on the link before asking it
 * (FEATURE_VERSIONS in peer/wire/constants.ts; none: every version this build speaks), the
 * decoder of its payload, and what payload and reply hold. The receiver's handler of each
 * row is in routing/inbound-calls.ts, typed by the row's decoder, so a row without a handler
 * does not compile; test/shard/cluster/wire/call-table.test.ts holds the docs and the
 * features to this table. Numbers are never reused: a node of another version may send any.
 */
export const CALLS = Object.freeze({
  LEAVE: { method: 1, decode: utf8, payload: "the leaving member's ring name (UTF-8); receivers drop it from their ring at once", reply: "empty" },
  MERGE_STATES: {
    method: 2,
    decode: decodeStates,
    payload: "state records with ages (shard/records/state-records.ts), merged into the receiver's table (merge-states.ts)",
    reply: "u32 records merged",
  },
  HANDOFF_DONE: {
    method: 3,
    decode: empty,
    payload: "empty: the sender has handed the receiver every state that moved to it when the sender added it to its ring",
    reply: "empty",
  },
  ADVERTISE: {
    method: 4,
    decode: raw,
    payload: "the sender's client-facing URL (UTF-8, may be empty; membership/directory.ts)",
    reply: "the receiver's (docs/client.md)",
  },
  REPLICATE: {
    method: 5,
    decode: raw,
    payload: "state records with ages the sender owns, kept as replicas (movement/replicator.ts)",
    reply: "u32 records kept",
  },
  BATCH: { method: 10, decode: decodeBatchRequest, payload: "a batch or one owner's part of it (batch-wire.ts)", reply: "a decision per item" },
  BATCH_COMMIT: { method: 11, decode: decodeReservation, payload: "u32 reservation: keep what it counted", reply: "empty" },
  BATCH_RELEASE: { method: 12, decode: decodeReservation, payload: "u32 reservation: give back what it counted", reply: "empty" },
  RESET: { method: 13, decode: decodeResetRequest, payload: "the states of one identifier to remove (batch-wire.ts)", reply: "those removed" },
  GIVE_BACK: {
    method: 14,
    decode: decodeGiveBack,
    payload:
      "u32 ms since the sender sent the decision, then its query as a one-item BATCH body: the owner gives back what it counted, its caller having left before the answer was written",
    reply: "empty",
  },
  TOP: {
    method: 15,
    decode: decodeTopRequest,
    payload: "what GET /top asks (top-wire.ts)",
    reply: "this member's identifiers blocked most that the filter admits",
  },
  RESET_NOTICE: {
    method: 16,
    decode: raw,
    payload: "a ring key (UTF-8) its owner has just reset; receivers drop their cached blocks of it (routing/reset-notices.ts)",
    reply: "empty",
  },
  LEASE: {
    method: 17,
    feature: "LEASE",
    decode: decodeLeaseRequest,
    payload: "a key's query whose share runs low on the sender, its cost the requests wanted (lease-wire.ts); the owner counts what it grants at once",
    reply: "u32 granted, f64 window start",
  },
  HOLD: {
    method: 18,
    feature: "HOLD",
    decode: empty,
    payload:
      "empty: may the sender answer shares by rule of the receiver's keys? Yes holds back a share for it in every window while its connection is open (leases/holders.ts)",
    reply: "u8 1 yes / 0 no, u8 members held back for",
  },
  RELEASE: {
    method: 19,
    feature: "RELEASE",
    decode: decodeRelease,
    payload: "a concurrency lease to free on its owner (release-wire.ts)",
    reply: "released, a renewal's lapse, remaining",
  },
  DEBT_NOTICE: {
    method: 20,
    feature: "CHARGE",
    decode: decodeDebtNotice,
    payload:
      "f64 a window's start (unix ms, the owner's clock), then a state key (UTF-8) a charge took past its limit in that window (lease-wire.ts); receivers answer nothing of it from their shares until the window ends (docs/shares.md, Debt)",
    reply: "empty",
  },
  MERGE_FINE: {
    method: 21,
    feature: "FINE_LAPSES",
    decode: decodeStatesWithFine,
    payload:
      "u32 length of the state records, MERGE_STATES' records, then the fine lapses of its concurrency states (shard/records/fine-records.ts), merged as MERGE_STATES and fitted to the merged states",
    reply: "u32 records merged",
  },
  REPLICATE_FINE: {
    method: 22,
    feature: "FINE_REPLICAS",
    decode: decodeReplicatedWithFine,
    payload:
      "u32 length of the state records, REPLICATE's records, then the fine lapses of its concurrency states (shard/records/fine-records.ts): each record replaces the replica's state and its overlay together (movement/replicator.ts)",
    reply: "u32 records kept",
  },
} as const satisfies Record<string, CallRow>);

/** What a row holds (see CALLS). */
export interface CallRow {
  readonly method: number;
  readonly feature?: ProtocolFeature;
  readonly decode: (payload: Buffer) => unknown;
  readonly payload: string;
  readonly reply: string;
}

export type CallName = keyof typeof CALLS;
/** What a call's payload decodes to: its handler's argument. */
export type CallRequest<K extends CallName> = ReturnType<(typeof CALLS)[K]["decode"]>;

/** The senders' names for the numbers: `client.call(CallMethod.LEASE, …)`. */
export const CallMethod = Object.freeze(Object.fromEntries(Object.entries(CALLS).map(([name, row]) => [name, row.method]))) as {
  readonly [K in CallName]: (typeof CALLS)[K]["method"];
};

/** A batch is cut at this size (plus one record), within the peer channel's 512 KiB frame limit. */
export const MAX_BATCH_BYTES = 256 * 1024;

import { fixedWindowStart } from "../../../algorithms/fixed-window.js";
import { decideBatchOn } from "../../local/batch.js";
import { itemPoliciesOf } from "../../local/item-policy.js";
import type { LocalDecider } from "../../local/local-decider.js";
import { giveBack } from "../../local/reservations.js";
import { parseStateKey, ringKeyOf, stateKeyOf } from "../../ring/state-key.js";
import { BatchMode, encodeBatchReply, encodeRemoved } from "../wire/batch-wire.js";
import { CALLS, mergeStates, type CallName, type CallRequest, type StateRecord } from "../wire/call-methods.js";
import { encodeLeaseReply } from "../wire/lease-wire.js";
import { admitState } from "../wire/peer-data.js";
import { encodeReleaseReply } from "../wire/release-wire.js";
import type { TopRequest } from "../wire/top-wire.js";
import { grantShare } from "../leases/grants.js";
import { ownership, type OwnershipView } from "./ownership.js";
import { fineHere, type FineRecord } from "../../records/fine-records.js";
import type { AgedRecord } from "../../records/state-records.js";
import { mergeWithFine } from "../../local/fine-store.js";

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
  /** DEBT_NOTICE: the owner of a shared key charged it past its limit in the window starting `windowStart` (leases/debt-notices.ts) */
  debtNotice(notice: { stateKey: string; windowStart: number }, from: string): void;
  /** TOP: this node's identifiers blocked most, as GET /top asks a member (top-offenders.ts) */
  top(request: TopRequest): Buffer;
  /**
   * REPLICATE: states their owner sent to keep as replicas, with the fine lapses of its
   * concurrency states (REPLICATE_FINE); returns how many were kept (throws when this node keeps none)
   */
  replicate(records: Buffer, from: string, fine?: readonly FineRecord[]): number;
}

/** What a handler may use: the ownership rule, this node's table and the services behind `events`. */
export interface CallContext {
  readonly view: OwnershipView;
  readonly local: LocalDecider;
  readonly events: InboundEvents;
  /** the sender's ring name, bound by the handshake */
  readonly from: string;
}

type Handler<K extends CallName> = (request: CallRequest<K>, c: CallContext) => Buffer | Promise<Buffer>;

const NOTHING = Buffer.alloc(0);

/** A hand-off batch's records checked and put on this node's clock (MERGE_STATES, MERGE_FINE). */
function admitHandOff(records: readonly AgedRecord[], c: CallContext, now: number): StateRecord[] {
  // Leaving: whatever arrived now would be stranded here when this process exits.
  // Refused, the sender merges the batch back into its own table.
  if (c.view.frozen) throw new Error("leaving: not accepting states");
  const admitted: StateRecord[] = [];
  let refused = 0;
  for (const r of records) {
    // Sent with ages: put on this node's clock here, whatever the sender's reads.
    const state = admitState(r.key, r.state, now);
    if (typeof state === "object") admitted.push({ key: r.key, state });
    else if (state === "invalid") refused++; // an expired state is equivalent to none: dropped quietly
  }
  if (refused > 0) c.events.statesRefused(c.from, refused);
  return admitted;
}
const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n, 0);
  return b;
};

/**
 * The receiver's side of every CALL method, one handler per row of CALLS (wire/call-methods.ts),
 * each given its payload decoded by the row's decoder. Peer data is validated like callers'
 * data: a payload that cannot be decoded is refused whole (the decoders throw), a state record
 * out of bounds is refused alone (peer-data.ts). A batch part is decided in one synchronous
 * step against this node's table; if any of its keys may not be decided here now (moved,
 * joining, leaving) the call fails and the coordinator fails the batch open. Reservations are
 * named by the coordinator: `from/number`.
 */
const HANDLERS: { readonly [K in CallName]: Handler<K> } = {
  LEAVE: (member, c) => {
    // The handshake binds `from`: a member may take only itself out of the ring.
    if (member !== c.from) throw new Error("a member may announce only its own leave");
    c.events.memberLeaving(member, c.from);
    return NOTHING;
  },
  MERGE_STATES: (records, c) => u32(mergeStates(c.local.table, admitHandOff(records, c, Date.now()), Date.now())),
  MERGE_FINE: ({ records, fine }, c) => {
    const now = Date.now();
    const admitted = admitHandOff(records, c, now);
    const overlays = new Map<string, FineRecord>();
    for (const f of fine) overlays.set(f.key, f);
    let merged = 0;
    for (const { key, state } of admitted) {
      const f = overlays.get(key);
      const parsed = f === undefined ? undefined : parseStateKey(key);
      // Out of bounds for the key's window: ignored, the state merged alone (its slots held to their buckets' ends).
      const here = f === undefined || parsed === undefined ? undefined : fineHere(f, parsed.duration * 1000, now);
      if (mergeWithFine(c.local.table, c.local.fineLapses, key, state, here, now)) merged++;
    }
    return u32(merged);
  },
  HANDOFF_DONE: (_, c) => {
    c.events.handoffDone(c.from);
    return NOTHING;
  },
  ADVERTISE: (payload, c) => c.events.advertise(payload, c.from),
  REPLICATE: (payload, c) => u32(c.events.replicate(payload, c.from)),
  REPLICATE_FINE: ({ records, fine }, c) => u32(c.events.replicate(records, c.from, fine)),
  BATCH: (request, c) => {
    const now = Date.now();
    const ringKeys = request.queries.map((q) => ringKeyOf(q.namespace, q.identifier));
    request.queries.forEach((q, i) => {
      const verdict = ownership(c.view, ringKeys[i]!, q.algorithm.code, q.duration, now, "forwarded");
      if (verdict.kind !== "decide") throw new Error(verdict.kind === "fail_open" ? verdict.why : "not decided here");
    });
    const reserve = request.mode === BatchMode.RESERVE;
    // The owner's policy: each item gets its override here, whoever coordinates the batch.
    const { policy, shadowMode } = c.local.policyInForce;
    const r = decideBatchOn(c.local.table, c.local.sharers, request.queries, ringKeys, now, true, reserve, itemPoliciesOf(policy, shadowMode, request.queries));
    if (reserve && r.allowed) c.local.reservations.hold(`${c.from}/${request.reservation}`, r.counted, now + request.holdMs);
    return encodeBatchReply(r.allowed, r.decisions, r.standing);
  },
  BATCH_COMMIT: (reservation, c) => {
    c.local.reservations.commit(`${c.from}/${reservation}`);
    return NOTHING;
  },
  BATCH_RELEASE: (reservation, c) => {
    c.local.reservations.release(`${c.from}/${reservation}`, Date.now());
    return NOTHING;
  },
  RESET: async (q, c) => {
    if (c.view.frozen) throw new Error("leaving: this node's states are moving");
    const ringKey = ringKeyOf(q.namespace, q.identifier);
    // Through the reset queue: a storm of resets from peers waits its turn like one from callers.
    const reply = await new Promise<Buffer>((resolve) => c.local.resets.submit(ringKey, q.algorithm, q.duration, (removed) => resolve(encodeRemoved(removed))));
    await c.events.resetApplied(ringKey);
    return reply;
  },
  GIVE_BACK: ({ ageMs, query: q }, c) => {
    // Counted at most ageMs ago on this clock: the earliest moment is taken, so a window that
    // turned meanwhile is left as it is (never given back from a window it was not counted in).
    // Nor into a state that did not hold it: one reset since that moment, or begun after it (a
    // member that missed the reset's notice gives back a grant the reset erased).
    const now = Date.now();
    const ringKey = ringKeyOf(q.namespace, q.identifier);
    const countedAt = now - ageMs;
    const resetAt = c.local.table.resetAt(ringKey, now);
    if (resetAt !== undefined && resetAt >= countedAt) return NOTHING;
    giveBack(c.local.table, stateKeyOf(q.algorithm.code, q.duration, ringKey), q.algorithm.code, q.duration, q.cost, countedAt, now);
    return NOTHING;
  },
  TOP: (request, c) => c.events.top(request),
  RESET_NOTICE: (payload, c) => {
    c.events.resetNotice(payload, c.from);
    return NOTHING;
  },
  LEASE: (q, c) => {
    const now = Date.now();
    const ringKey = ringKeyOf(q.namespace, q.identifier);
    // Granted only by the key's owner on this node's ring too: a stray's count is not the one that holds.
    const verdict = ownership(c.view, ringKey, q.algorithm.code, q.duration, now, "forwarded");
    const grant = verdict.kind === "decide" && !verdict.stray ? grantShare(c.local, q, ringKey, now, c.view.ring.size) : undefined;
    return encodeLeaseReply(grant?.granted ?? 0, grant?.windowStart ?? fixedWindowStart(now, q.duration * 1000));
  },
  HOLD: (_, c) => c.events.hold(c.from),
  RELEASE: (rq, c) => {
    const now = Date.now();
    // Freed only by the key's owner: elsewhere the caller gets a peer error (503) and may retry.
    const verdict = ownership(c.view, ringKeyOf(rq.query.namespace, rq.query.identifier), rq.query.algorithm.code, rq.query.duration, now, "forwarded");
    if (verdict.kind !== "decide") throw new Error(verdict.kind === "fail_open" ? verdict.why : "not the owner");
    return encodeReleaseReply(c.local.releaseSync(rq, now));
  },
  DEBT_NOTICE: (notice, c) => {
    c.events.debtNotice(notice, c.from);
    return NOTHING;
  },
};

type Answer = (payload: Buffer, c: CallContext) => Buffer | Promise<Buffer>;

/** The table by number, built once: the row's decoder, then its handler. */
const BY_METHOD = new Map<number, Answer>(
  (Object.keys(CALLS) as CallName[]).map((name) => {
    const row = CALLS[name];
    const handler = HANDLERS[name] as (request: unknown, c: CallContext) => Buffer | Promise<Buffer>;
    return [row.method, (payload, c) => handler(row.decode(payload), c)];
  }),
);

/** The method numbers this node answers (a test holds them to CALLS). */
export const ANSWERED_METHODS: ReadonlySet<number> = new Set(BY_METHOD.keys());

/** A CALL from a peer: its row decodes the payload, its handler answers; a throw or an unknown method answers an error. */
export async function answerCall(method: number, payload: Buffer, c: CallContext): Promise<Buffer> {
  const answer = BY_METHOD.get(method);
  if (answer === undefined) throw new Error(`unknown call method ${method}`);
  return answer(payload, c);
}

import { concurrency, releaseLease, releaseOldest } from "../../algorithms/concurrency.js";
import { releaseFine, releaseOldestFine } from "../../algorithms/fine-lapses.js";
import type { FineStore } from "./fine-store.js";
import type { LimitState } from "../../algorithms/index.js";
import type { ReleaseOutcome, ReleaseQuery } from "../../decision.js";
import { ringKeyOf, stateKeyOf } from "../ring/state-key.js";
import { KEEP_WEIGHT, type StateTable } from "../table/state-table.js";
import type { ReleasedLeases } from "./released-leases.js";

const freed: LimitState = { a: 0, b: 0, c: 0 };

/**
 * The owner frees the slot of one lease (docs/api.md, POST /limit/release). Invariant: a lease
 * frees at most one slot, once: it is remembered (released-leases.ts) in the same synchronous
 * step that frees it, and a lease already remembered, lapsed, or of a bucket that holds
 * nothing frees nothing. A release without a lease id (RLS: Envoy's stream-done call names
 * none) frees the `cost` oldest slots instead, with no memory: nothing identifies it. With `renew`, a freed slot is held again at once by a fresh lease
 * (`acquire`, the owner's usual decision), so a renewal never finds the key full.
 */
export function releaseOnOwner(
  table: StateTable,
  released: ReleasedLeases,
  fineLapses: FineStore,
  rq: ReleaseQuery,
  now: number,
  acquire: (ringKey: string) => { allowed: boolean; resetTime: number; remaining: number },
): ReleaseOutcome {
  const q = rq.query;
  const ringKey = ringKeyOf(q.namespace, q.identifier);
  const key = stateKeyOf(concurrency.code, q.duration, ringKey);
  const state = table.get(key);
  const lapseMs = rq.lapseS * 1000;
  const none: ReleaseOutcome = { ok: true, released: false, renewedLapseS: 0, remaining: 0 };
  if (state === undefined) return none;
  const D = q.duration * 1000;
  // Through the key's fine lapses when it has them (fine-store.ts): what they free they also take off its entries.
  const fine = fineLapses.use(key, state, D, now);
  if (rq.leaseId === "") {
    const n = fine !== undefined ? releaseOldestFine(state, fine, D, now, freed, q.cost) : releaseOldest(state, D, now, freed, q.cost);
    fineLapses.settle(key);
    if (n > 0) table.set(key, { a: freed.a, b: freed.b, c: freed.c, expiresAt: state.expiresAt, origin: state.origin, born: state.born }, KEEP_WEIGHT);
    return { ok: true, released: n > 0, renewedLapseS: 0, remaining: 0 };
  }
  // Remembered first: a release the memory has no room for frees nothing (its slot lapses on time).
  if (lapseMs <= now || released.has(rq.leaseId) || !released.canRemember()) {
    fineLapses.settle(key);
    return none;
  }
  const done = fine !== undefined ? releaseFine(state, fine, rq.lapseS, D, now, freed) : releaseLease(state, 1, lapseMs, D, now, freed);
  fineLapses.settle(key);
  if (!done || !released.remember(rq.leaseId, rq.lapseS)) return none;
  table.set(key, { a: freed.a, b: freed.b, c: freed.c, expiresAt: state.expiresAt, origin: state.origin, born: state.born }, KEEP_WEIGHT);
  if (!rq.renew) return { ok: true, released: true, renewedLapseS: 0, remaining: 0 };
  const d = acquire(ringKey);
  return { ok: true, released: true, renewedLapseS: d.allowed ? d.resetTime : 0, remaining: d.remaining };
}

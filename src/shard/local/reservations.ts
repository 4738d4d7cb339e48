import { algorithmByCode, type LimitState } from "../../algorithms/index.js";
import type { Counted } from "./batch.js";
import { KEEP_WEIGHT, type StateTable } from "../table/state-table.js";

/** Bound on reservations held at once; past it the oldest is released early (a refused batch at worst). */
const MAX_RESERVATIONS = 100_000;

interface Reservation {
  /** unix ms after which an unconfirmed reservation is released */
  deadline: number;
  counted: Counted[];
}

/**
 * Counts an owner has made for one part of a batch that spans owners (docs/api.md): they
 * count from the moment they are reserved, so nothing can interleave and over-admit, and
 * are then committed (kept) or released (given back with Algorithm.refund). A reservation
 * its coordinator never confirms is released once its deadline passes, by one coarse sweep
 * (the table's once-a-second sweep), not a timer per key.
 */
export class Reservations {
  private readonly held = new Map<string, Reservation>();
  /** released because their deadline passed, for the metrics and logs */
  expired = 0;

  constructor(private readonly table: StateTable) {}

  get size(): number {
    return this.held.size;
  }

  /** `counted` is already in the table (decideBatchOn with commit). `id` is unique per coordinator. */
  hold(id: string, counted: Counted[], deadline: number): void {
    if (this.held.size >= MAX_RESERVATIONS) {
      const oldest = this.held.keys().next().value;
      if (oldest !== undefined) this.release(oldest, deadline);
    }
    this.held.set(id, { deadline, counted });
  }

  commit(id: string): boolean {
    return this.held.delete(id);
  }

  /** Give back what reservation `id` counted; false when it is not held (committed, released, or never made). */
  release(id: string, now: number): boolean {
    const r = this.held.get(id);
    if (r === undefined) return false;
    this.held.delete(id);
    for (const c of r.counted) giveBack(this.table, c.key, c.algorithmCode, c.duration, c.cost, c.at, now);
    return true;
  }

  /** Release every reservation whose deadline has passed. Returns how many. */
  sweep(now: number): number {
    let n = 0;
    for (const [id, r] of this.held) {
      if (r.deadline > now) continue;
      this.release(id, now);
      n++;
    }
    this.expired += n;
    return n;
  }
}

const refunded: LimitState = { a: 0, b: 0, c: 0 };

/**
 * Give back `cost` counted at `countedAt` on the state at `key` (Algorithm.refund): a released
 * reservation, or a forwarded decision whose caller left before its answer was written.
 * A state that is gone (reset, expired, handed over) has nothing left here to give back.
 */
export function giveBack(table: StateTable, key: string, algorithmCode: number, duration: number, cost: number, countedAt: number, now: number): void {
  const state = table.get(key);
  const algorithm = algorithmByCode(algorithmCode);
  if (state === undefined || algorithm === undefined) return;
  // Born in a later second than the count: this history never held it (a reset came between).
  if (state.born * 1000 > countedAt) return;
  algorithm.refund(state, cost, countedAt, duration * 1000, now, refunded);
  table.set(key, { a: refunded.a, b: refunded.b, c: refunded.c, expiresAt: state.expiresAt, origin: state.origin, born: state.born }, KEEP_WEIGHT);
}

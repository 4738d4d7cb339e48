import type { MessagePort } from "node:worker_threads";
import {
  failOpenBatch,
  failOpenDecision,
  newDecision,
  type BatchOutcome,
  type Decider,
  type Decision,
  type LimitQuery,
  type ReleaseOutcome,
  type ReleaseQuery,
  type ResetOutcome,
  type ResetQuery,
} from "../decision.js";
import type { TopQuery, TopResult } from "../http/endpoints/top.js";
import type { KeyScope } from "../auth/api-keys.js";
import type { RlsFailure } from "../rls/errors.js";
import type { RlsRequest, RlsResponse } from "../rls/wire/messages.js";
import { ByteRing } from "./byte-ring.js";
import { answerSlot, queryMaxBytes, readAnswer, writeQuery } from "./decision-codec.js";
import { fromWireBatch, toWireQuery, type Call, type FromWorker, type WireDecision } from "./messages.js";

/**
 * A worker's Decider: the state owner's, one thread away. POST /limit and /limit/charge go
 * over the decision rings, written at once and announced once per turn; the rest is a call
 * by postMessage. The owner answers every query it reads (ring-server.ts), and a worker
 * never has more than MAX_IN_FLIGHT queries out, which is what keeps the answer ring from
 * ever being full (its size is derived from it in worker-pool.ts).
 *
 * Overload: a query that finds no free slot or no room in the ring is answered like an owner
 * out of reach, fail-open `peer_unavailable` (200 degraded, or 503 with FAIL_OPEN=false):
 * the worker's loop is never blocked waiting for the owner.
 *
 * A caller who leaves (`left`) raises its slot's word in `gone`, which the owner reads before
 * it writes a forward's answer back (ring-server.ts): seen, the forwarding decider gives back
 * what the owner counted, as on one thread; raised after that read, the answer is already on
 * its way and stays counted, like an answer made at once.
 */
export const MAX_IN_FLIGHT = 4096;

/** The owner's and a worker's shared words of callers gone, one per slot. */
export function goneWords(): SharedArrayBuffer {
  return new SharedArrayBuffer(MAX_IN_FLIGHT * Int32Array.BYTES_PER_ELEMENT);
}

export class RingDecider implements Decider {
  private readonly queries: ByteRing;
  private readonly answers: ByteRing;
  /** one Int32 word per slot: 1 once the caller of the query in that slot left */
  private readonly gone: Int32Array;
  private readonly waiting: (((d: Decision) => boolean) | undefined)[] = new Array(MAX_IN_FLIGHT).fill(undefined);
  private readonly freeSlots = new Int32Array(MAX_IN_FLIGHT);
  private free = MAX_IN_FLIGHT;
  private wakeScheduled = false;
  private readonly scratch = newDecision();
  private readonly calls = new Map<number, (value: unknown, error?: string) => void>();
  private nextCall = 0;
  /** decisions sent over the ring and calls made, for the per-worker metric */
  decisions = 0;

  constructor(
    queries: SharedArrayBuffer,
    answers: SharedArrayBuffer,
    gone: SharedArrayBuffer,
    private readonly port: MessagePort,
  ) {
    this.queries = new ByteRing(queries);
    this.answers = new ByteRing(answers);
    this.gone = new Int32Array(gone);
    for (let i = 0; i < MAX_IN_FLIGHT; i++) this.freeSlots[i] = MAX_IN_FLIGHT - 1 - i;
    void this.answers.serve(() => this.drainAnswers());
  }

  decide(query: LimitQuery, now: number, done: (decision: Decision) => boolean): void {
    const ring = this.queries;
    const at = this.free === 0 ? -1 : ring.reserve(queryMaxBytes(query));
    if (at < 0) {
      done(failOpenDecision(query, now, "peer_unavailable", this.scratch));
      return;
    }
    const slot = this.freeSlots[--this.free]!;
    this.waiting[slot] = done;
    // Lowered before the query is committed, so the owner never reads the last caller's word.
    if (this.gone[slot] !== 0) Atomics.store(this.gone, slot, 0);
    ring.commit(writeQuery(ring, at, slot, query, now));
    this.decisions++;
    if (!this.wakeScheduled) {
      this.wakeScheduled = true;
      // One wake per turn: every query this turn produced travels on it.
      setImmediate(this.wake);
    }
  }

  private readonly wake = (): void => {
    this.wakeScheduled = false;
    this.queries.wake();
  };

  left(done: (decision: Decision) => boolean): void {
    // A scan of the slots, once per caller gone with a decision out: rare, and it spares
    // every decision a map entry. Not found: its answer was already delivered.
    const slot = this.waiting.indexOf(done);
    if (slot >= 0) Atomics.store(this.gone, slot, 1);
  }

  private drainAnswers(): void {
    const ring = this.answers;
    for (let at = ring.next(); at >= 0; at = ring.next()) {
      const slot = answerSlot(ring, at);
      const done = this.waiting[slot];
      if (done === undefined) continue;
      this.waiting[slot] = undefined;
      this.freeSlots[this.free++] = slot;
      done(readAnswer(ring, at, this.scratch));
    }
    ring.release();
  }

  decideBatch(queries: readonly LimitQuery[], now: number, done: (outcome: BatchOutcome) => void): void {
    this.call({ op: "batch", queries: queries.map(toWireQuery), now }, (v, error) =>
      done(
        error === undefined ? fromWireBatch(v as { decisions: WireDecision[]; degraded: BatchOutcome["degraded"] }) : failOpenBatch(queries, now, "internal"),
      ),
    );
  }

  reset(query: ResetQuery, now: number, done: (outcome: ResetOutcome) => void): void {
    this.call({ op: "reset", query: { ...query, algorithm: query.algorithm?.code }, now }, (v, error) =>
      done(error === undefined ? (v as ResetOutcome) : { ok: false, reason: "internal" }),
    );
  }

  release(query: ReleaseQuery, now: number, done: (outcome: ReleaseOutcome) => void): void {
    this.call({ op: "release", query: { ...query, query: toWireQuery(query.query) }, now }, (v, error) =>
      done(error === undefined ? (v as ReleaseOutcome) : { ok: false, reason: "internal" }),
    );
  }

  top(query: TopQuery): Promise<TopResult> {
    return new Promise((resolve, reject) =>
      this.call({ op: "top", query }, (v, error) => (error === undefined ? resolve(v as TopResult) : reject(new Error(error)))),
    );
  }

  /** POST /json: the RLS service is the owner's (its policy and its decider live there). */
  shouldRateLimit(request: RlsRequest, scope: KeyScope, done: (failure: RlsFailure | undefined, response: RlsResponse | undefined) => void): void {
    this.call({ op: "json", request, prefixes: scope.prefixes }, (v, error) => {
      if (error !== undefined) return done({ kind: "internal", message: "internal error" } as RlsFailure, undefined);
      const [failure, response] = v as [RlsFailure | undefined, RlsResponse | undefined];
      done(failure, response);
    });
  }

  /** The node's /metrics text: the owner's and every worker's, summed by the owner. */
  metrics(): Promise<string> {
    return new Promise((resolve, reject) =>
      this.call({ op: "metrics" }, (v, error) => (error === undefined ? resolve(v as string) : reject(new Error(error)))),
    );
  }

  private call(call: Call, reply: (value: unknown, error?: string) => void): void {
    const id = this.nextCall++;
    this.calls.set(id, reply);
    this.decisions++;
    this.port.postMessage({ t: "call", id, call } satisfies FromWorker);
  }

  /** The owner's answer to a call. */
  replied(id: number, value: unknown, error: string | undefined): void {
    const reply = this.calls.get(id);
    if (reply === undefined) return;
    this.calls.delete(id);
    reply(value, error);
  }

  get outstanding(): number {
    return MAX_IN_FLIGHT - this.free + this.calls.size;
  }
}

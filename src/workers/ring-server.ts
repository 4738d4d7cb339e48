import { newDecision, type Decider, type Decision, type LimitQuery } from "../decision.js";
import type { Logger } from "../logger.js";
import { ByteRing } from "./byte-ring.js";
import { ANSWER_BYTES, queryNow, querySlot, readQuery, writeAnswer } from "./decision-codec.js";

const UNPARSED: Decision = { ...newDecision(), allowed: true, degraded: "internal" };

/**
 * The state owner's end of one worker's decision rings: it reads the queries the worker wrote,
 * asks the node's Decider (the same one a single-thread node's front end asks), and writes
 * each answer back, waking the worker once per batch.
 *
 * Invariant: every query read is answered exactly once (now, or when a forwarded decision
 * comes back), so the worker's slot count bounds the answers in the ring and a write into the
 * answer ring always finds room. After `close` (the worker died), an answer has nowhere to go:
 * `done` returns false, and a forwarding decider gives back what it counted. The same when
 * the worker raised the slot's `gone` word (its caller left, ring-decider.ts) before the
 * answer is written: it is still written, so the slot comes back, and `done` returns false.
 */
export class RingServer {
  private readonly queries: ByteRing;
  private readonly answers: ByteRing;
  private readonly gone: Int32Array;
  private closed = false;
  private wakeScheduled = false;

  constructor(
    queries: SharedArrayBuffer,
    answers: SharedArrayBuffer,
    gone: SharedArrayBuffer,
    private readonly decider: Decider,
    private readonly logger: Logger,
  ) {
    this.queries = new ByteRing(queries);
    this.answers = new ByteRing(answers);
    this.gone = new Int32Array(gone);
    void this.queries.serve(() => this.drain());
  }

  private drain(): void {
    const ring = this.queries;
    const decider = this.decider;
    let answered = false;
    for (let at = ring.next(); at >= 0; at = ring.next()) {
      const slot = querySlot(ring, at);
      const query = readQuery(ring, at, ring.lastLength);
      const now = queryNow(ring, at);
      if (query === undefined) {
        // Answered all the same (the invariant above), as an internal fault: fail-open by the
        // caller's FAIL_OPEN, nothing counted.
        this.logger.error({ slot }, "a worker sent a query record that does not parse");
        this.answer(slot, UNPARSED);
        answered = true;
        continue;
      }
      const sync = decider.decideSync?.(query, now);
      if (sync !== undefined) {
        this.answer(slot, sync);
        answered = true;
      } else decider.decide(query, now, (d) => this.later(slot, d, query));
    }
    ring.release();
    if (answered) this.answers.wake();
  }

  private answer(slot: number, d: Decision): void {
    const ring = this.answers;
    const at = ring.reserve(ANSWER_BYTES);
    if (at < 0) {
      // Cannot happen while the invariant above holds; if it ever does, the caller waits on a
      // slot that never comes back, which the log names.
      this.logger.error({ slot }, "answer ring full: a worker's decision was not answered");
      return;
    }
    writeAnswer(ring, at, slot, d);
    ring.commit(ANSWER_BYTES);
  }

  /** A decision that came back after the drain (a forward): answered, the wake once per turn. */
  private later(slot: number, d: Decision, _q: LimitQuery): boolean {
    if (this.closed) return false;
    // Read before the answer is written: a caller who leaves after this is counted (ring-decider.ts).
    // A slot past the words (a record that lies) reads as a caller still there.
    const delivered = slot >= this.gone.length || Atomics.load(this.gone, slot) === 0;
    this.answer(slot, d);
    if (!this.wakeScheduled) {
      this.wakeScheduled = true;
      setImmediate(() => {
        this.wakeScheduled = false;
        this.answers.wake();
      });
    }
    return delivered;
  }

  close(): void {
    this.closed = true;
    this.queries.close();
  }
}

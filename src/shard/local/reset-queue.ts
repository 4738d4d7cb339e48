import type { Algorithm } from "../../algorithms/index.js";
import type { RemovedState } from "../../decision.js";
import type { StateTable } from "../table/state-table.js";
import { resetOn } from "./reset.js";

/**
 * Work resets may do in one event-loop turn: a reset counts 1 plus the states it removes.
 * A removed state cost 1.6–8 µs in-process at load 10 on 2 cores (4,096 states of one
 * identifier), a reset of one state ~0.6 µs; so a turn spends at most a few ms on resets
 * before the node reads its sockets again. A single reset is never split (it is one step
 * for the requests around it): one that removes more takes a turn of its own.
 *
 * A reset that waits is answered from a later turn, which closes a pipelining caller's
 * connection (docs/api.md, Pipelining): the budget is large enough that a read of pipelined
 * resets (~340 in 64 KiB) fits it unless they remove thousands of states each.
 */
export const RESET_WORK_PER_TURN = 8192;

interface Waiting {
  ringKey: string;
  algorithm: Algorithm | undefined;
  duration: number | undefined;
  done: (removed: RemovedState[]) => void;
}

/**
 * Resets of this node's table, fair to the other callers: each turn runs resets until they
 * have done RESET_WORK_PER_TURN, and the rest wait for the next turn (setImmediate: after
 * the node has read its sockets), in arrival order. A storm of resets, pipelined or from
 * many peers, so costs the owner at most that much per turn: its decisions, forwards and
 * /health keep being answered between. A reset is applied when it runs, at that time.
 */
export class ResetQueue {
  private readonly waiting: Waiting[] = [];
  private head = 0;
  /** work done in this turn; cleared by the next turn's run */
  private spent = 0;
  private scheduled = false;

  constructor(
    private readonly table: StateTable,
    private readonly workPerTurn = RESET_WORK_PER_TURN,
  ) {}

  /** Reset now when this turn has room and nothing waits, else in a later turn; `done` gets what was removed. */
  submit(ringKey: string, algorithm: Algorithm | undefined, duration: number | undefined, done: (removed: RemovedState[]) => void): void {
    const job = { ringKey, algorithm, duration, done };
    if (this.head === this.waiting.length && this.spent < this.workPerTurn) this.run(job);
    else this.waiting.push(job);
    this.schedule();
  }

  /** resets waiting for a turn */
  get length(): number {
    return this.waiting.length - this.head;
  }

  private run(job: Waiting): void {
    const removed = resetOn(this.table, job.ringKey, job.algorithm, job.duration, Date.now());
    this.spent += 1 + removed.length;
    job.done(removed);
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.turn);
  }

  private readonly turn = (): void => {
    this.scheduled = false;
    this.spent = 0;
    while (this.head < this.waiting.length && this.spent < this.workPerTurn) {
      const job = this.waiting[this.head]!;
      this.waiting[this.head++] = undefined as unknown as Waiting;
      this.run(job);
    }
    if (this.head === this.waiting.length) {
      this.waiting.length = 0;
      this.head = 0;
    }
    if (this.spent > 0 || this.head < this.waiting.length) this.schedule();
  };
}

/** Something with a deadline (performance.now() ms) that is told when it passes, unless settled first. */
export interface Expiring {
  readonly deadline: number;
  readonly settled: boolean;
  expire(): void;
}

/**
 * Deadlines of in-flight checks, with one timer for all of them rather than a setTimeout
 * per check (undici's habit). Every check gets the same timeout, so deadlines arrive in
 * the order checks start and a FIFO queue is sorted: the timer only ever waits for the
 * head. Settled checks stay queued until the timer passes them (a flag, not a removal).
 */
export class Deadlines {
  private queue: Expiring[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;

  add(item: Expiring): void {
    this.queue.push(item);
    if (this.timer === undefined) this.arm(item.deadline);
  }

  /** Expire everything queued now (close()). */
  expireAll(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const items = this.queue.slice(this.head);
    this.queue = [];
    this.head = 0;
    for (const item of items) if (!item.settled) item.expire();
  }

  private arm(deadline: number): void {
    // +1: setTimeout may fire a fraction of a millisecond early against performance.now().
    this.timer = setTimeout(() => this.fire(), Math.max(0, deadline - performance.now()) + 1);
    this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    const now = performance.now();
    const queue = this.queue;
    let i = this.head;
    for (; i < queue.length; i++) {
      const item = queue[i]!;
      if (item.settled) continue;
      if (item.deadline > now) break;
      item.expire();
    }
    // Compact once the dead prefix is most of the array.
    if (i === queue.length) {
      this.queue = [];
      this.head = 0;
      return;
    }
    if (i > 1024 && i * 2 > queue.length) {
      this.queue = queue.slice(i);
      this.head = 0;
    } else {
      this.head = i;
    }
    this.arm(this.queue[this.head]!.deadline);
  }
}

/**
 * The owner's memory of released concurrency leases (docs/api.md, Concurrency): what makes a
 * release idempotent. A slot is counted in its lapse bucket, not by lease, so a second release
 * of one lease would free another holder's slot of that bucket; this memory refuses it. A
 * lease is remembered from its release until it lapses (after that a release of it frees
 * nothing anyway: its bucket is gone), so the memory holds only leases released before their
 * lapse, and its size is bounded in bytes: `maxBytes` (a share of MAX_MEMORY_MB,
 * memory-budget.ts) at ENTRY_BYTES each. When it is full a release frees nothing and its slot
 * lapses on time: never a slot freed twice, at worst one held until its lapse.
 *
 * Not replicated nor handed over: after an owner change, a lease released on the old owner
 * and released again on the new one frees one slot once more (at most once per lease).
 */
export class ReleasedLeases {
  /** Bytes per remembered lease: its 22-character id string (40), the Map entry (~40) and its place in a second's list (~16), rounded up. */
  static readonly ENTRY_BYTES = 112;

  private readonly lapseOf = new Map<string, number>();
  /** lapse second → the ids that lapse then, for the sweep */
  private readonly bySecond = new Map<number, string[]>();
  readonly maxEntries: number;
  /** releases refused because the memory was full (their slots lapse on time) */
  refused = 0;

  constructor(maxBytes: number) {
    this.maxEntries = Math.max(1, Math.floor(maxBytes / ReleasedLeases.ENTRY_BYTES));
  }

  get size(): number {
    return this.lapseOf.size;
  }

  get bytes(): number {
    return this.lapseOf.size * ReleasedLeases.ENTRY_BYTES;
  }

  has(id: string): boolean {
    return this.lapseOf.has(id);
  }

  /** Whether `remember` has room for one more. */
  canRemember(): boolean {
    return this.lapseOf.size < this.maxEntries;
  }

  /** Remember `id` until unix second `lapseS`; false (nothing remembered) when the memory is full. */
  remember(id: string, lapseS: number): boolean {
    if (this.lapseOf.size >= this.maxEntries) {
      this.refused++;
      return false;
    }
    this.lapseOf.set(id, lapseS);
    const list = this.bySecond.get(lapseS);
    if (list === undefined) this.bySecond.set(lapseS, [id]);
    else list.push(id);
    return true;
  }

  /** Forget the leases that have lapsed at `now` (unix ms): the table's once-a-second sweep. */
  sweep(now: number): void {
    for (const [second, ids] of this.bySecond) {
      if (second * 1000 > now) continue;
      for (const id of ids) this.lapseOf.delete(id);
      this.bySecond.delete(second);
    }
  }
}

/** The typed arrays the table's per-slot columns are made of. */
type SlotColumn = Float64Array | Uint32Array | Int32Array;
type ColumnType<T extends SlotColumn> = new (buffer: ArrayBuffer, byteOffset: number, length: number) => T;

/**
 * One ArrayBuffer that a table's growth step carves all its per-slot columns out of. Twenty
 * arrays allocated and freed one by one at each step left malloc's main arena holding the freed
 * ones. One block of the whole step is above glibc's mmap threshold as long as the threshold stays
 * fixed (MALLOC_MMAP_THRESHOLD_, set by the image and npm start: left to glibc it rises to the
 * largest block freed, and every step lands in the arena, docs/durability.md), so malloc maps it
 * on its own and unmaps it when freed, and the pages of capacity not used yet stay untouched.
 */
export class Slab {
  private readonly buffer: ArrayBuffer;
  private offset = 0;

  /** Room for columns of `capacity` slots, `bytesPerSlot` bytes a slot in all, each column starting on 8 bytes. */
  constructor(
    readonly capacity: number,
    bytesPerSlot: number,
  ) {
    // Each column is at least 4 bytes a slot, so bytesPerSlot / 4 columns at most, each padded by at most 4 bytes.
    this.buffer = new ArrayBuffer(capacity * bytesPerSlot + bytesPerSlot);
  }

  /**
   * Give the bytes back now, once every column taken from this slab has been carried over to the
   * next one: left to V8, a freed step stays mapped until a major GC finds its ArrayBuffer
   * (bench/memory.mjs --cluster read the buffers outside the heap 249 B per key once, 172-214 else).
   * Detaching (ArrayBuffer.prototype.transfer, Node 21 and later) frees the backing store at once;
   * on Node 20 the GC still does. Every column taken from it reads 0 long afterwards.
   */
  free(): void {
    (this.buffer as ArrayBuffer & { transfer?: (length: number) => ArrayBuffer }).transfer?.(0);
  }

  take<T extends SlotColumn>(type: ColumnType<T>, bytesPerElement: number): T {
    const at = this.offset;
    const end = at + this.capacity * bytesPerElement;
    if (end > this.buffer.byteLength) throw new RangeError("slab: columns beyond the bytes it was made for");
    this.offset = (end + 7) & ~7;
    return new type(this.buffer, at, this.capacity);
  }
}

/**
 * Up to this capacity a table doubles; above it, it grows by a quarter: its arrays are at
 * most 25 % larger than the states they hold instead of 100 % (each step copies the columns
 * once: about 5 copies of a slot over its life instead of 2, on inserts only).
 */
const DOUBLING_UP_TO = 1 << 16;
export const nextCapacity = (capacity: number): number => (capacity < DOUBLING_UP_TO ? capacity * 2 : capacity + Math.ceil(capacity / 4));

/** A copy of `column` in a new array of its type with `capacity` slots (the new ones 0), for a table that grows; from `slab` when given (its capacity). */
export function widened<T extends SlotColumn>(column: T, capacity: number, slab?: Slab): T {
  const type = column.constructor as ColumnType<T> & (new (length: number) => T);
  if (slab !== undefined && slab.capacity !== capacity) throw new RangeError("slab: made for another capacity");
  const wider = slab !== undefined ? slab.take(type, column.BYTES_PER_ELEMENT) : new type(capacity);
  wider.set(column);
  return wider;
}

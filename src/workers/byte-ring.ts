/**
 * A single-producer, single-consumer ring of byte records in a SharedArrayBuffer: how a worker
 * thread hands the state owner its decisions and gets the answers back (docs/architecture.md,
 * Threads). Bounded in bytes: a write that does not fit is refused, never waited for, so no
 * thread's event loop ever blocks on it. The consumer sleeps in Atomics.waitAsync, never
 * Atomics.wait, and the producer wakes it at most once per turn (`wake`), and only when it
 * sleeps: a consumer still in its turn finds the records without a wake-up.
 *
 * Layout: eight Int32 header words (write and read byte counters, the wake sequence, closed,
 * sleeping, three unused), then the records. The counters only grow (modulo 2^32) and the capacity is a power of two,
 * so `write - read` is the bytes in use and `counter & mask` a position. A record is a u32
 * length and its payload, padded to 4 bytes, and never straddles the end: a length of
 * WRAP there tells the reader to go on at 0.
 */
const WRITE = 0;
const READ = 1;
const SEQ = 2;
const CLOSED = 3;
const SLEEPING = 4;
const HEADER_WORDS = 8;
const HEADER_BYTES = 4 * HEADER_WORDS;
const WRAP = 0xffffffff;

/** Atomics.waitAsync (Node 16+) is in the ES2024 library, past this build's target. */
type WaitAsync = (a: Int32Array, index: number, value: number) => { async: false; value: string } | { async: true; value: Promise<string> };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

const pad = (n: number): number => (n + 3) & ~3;

/** The end of this loop turn: after the I/O callbacks and immediates queued so far. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class ByteRing {
  readonly buffer: Buffer;
  /** the records' bytes as `buffer`, for the codec's numbers (DataView's are inlined by V8, Buffer's are not) */
  readonly view: DataView;
  private readonly header: Int32Array;
  private readonly mask: number;
  /** this side's own counter, published with Atomics.store */
  private write = 0;
  private read = 0;
  private pendingAt = -1;

  /** A ring of `capacity` bytes (a power of two) in a new SharedArrayBuffer. */
  static create(capacity: number): SharedArrayBuffer {
    if (capacity < 64 || (capacity & (capacity - 1)) !== 0) throw new RangeError(`ring capacity must be a power of two >= 64, got ${capacity}`);
    return new SharedArrayBuffer(HEADER_BYTES + capacity);
  }

  constructor(readonly sab: SharedArrayBuffer) {
    this.header = new Int32Array(sab, 0, HEADER_WORDS);
    this.buffer = Buffer.from(sab, HEADER_BYTES);
    this.view = new DataView(sab, HEADER_BYTES);
    this.mask = this.buffer.length - 1;
    this.write = Atomics.load(this.header, WRITE);
    this.read = Atomics.load(this.header, READ);
  }

  get capacity(): number {
    return this.buffer.length;
  }

  /**
   * Producer: the offset at which up to `maxLen` payload bytes may be written, or -1 when the
   * ring lacks the room now. `commit(len)` publishes them; nothing is visible before.
   */
  reserve(maxLen: number): number {
    const size = pad(4 + maxLen);
    const free = this.capacity - ((this.write - Atomics.load(this.header, READ)) >>> 0);
    let pos = this.write & this.mask;
    const tail = this.capacity - pos;
    if (size > tail) {
      // The record goes at 0; the tail is skipped and counts as used until read.
      if (tail + size > free) return -1;
      this.view.setUint32(pos, WRAP, true);
      this.write = (this.write + tail) | 0;
      pos = 0;
    } else if (size > free) return -1;
    this.pendingAt = pos;
    return pos + 4;
  }

  /** Producer: publish the record reserved last, of `len` bytes (at most what was reserved). */
  commit(len: number): void {
    this.view.setUint32(this.pendingAt, len, true);
    this.write = (this.write + pad(4 + len)) | 0;
    Atomics.store(this.header, WRITE, this.write);
  }

  /** wake-ups sent (the consumer slept) and skipped (it was awake): for the bench and the tests */
  wakes = 0;
  wakesSkipped = 0;

  /**
   * Producer: wake the consumer (once per batch of commits, after them), if it sleeps. The
   * commits stored WRITE before this reads SLEEPING, and the consumer stores SLEEPING before it
   * reads WRITE a last time (serve): with sequentially consistent Atomics one of the two sees
   * the other's store, so either the consumer finds the records or this wakes it.
   */
  wake(): void {
    if (Atomics.load(this.header, SLEEPING) === 0) {
      this.wakesSkipped++;
      return;
    }
    this.wakes++;
    Atomics.add(this.header, SEQ, 1);
    Atomics.notify(this.header, SEQ);
  }

  /**
   * Consumer: the offset of the next record's payload (its length in `lastLength`), or -1 when
   * the ring is empty. The bytes stay the reader's until `release`.
   */
  next(): number {
    const written = Atomics.load(this.header, WRITE);
    if (this.read === written) return -1;
    let pos = this.read & this.mask;
    let len = this.view.getUint32(pos, true);
    if (len === WRAP) {
      this.read = (this.read + this.capacity - pos) | 0;
      if (this.read === written) return -1;
      pos = 0;
      len = this.view.getUint32(0, true);
    }
    this.lastLength = len;
    this.read = (this.read + pad(4 + len)) | 0;
    return pos + 4;
  }

  lastLength = 0;

  /** Consumer: give the bytes read so far back to the producer. */
  release(): void {
    Atomics.store(this.header, READ, this.read);
  }

  /**
   * Consumer: call `drain` whenever records may have arrived, until `close`. After a drain the
   * thread stays awake for the rest of its turn (`yieldTurn`: the other rings, the sockets) and
   * drains again at its end; only a ring still empty then goes to sleep. A busy thread thus
   * takes its records without being woken (the producer skips the notify while SLEEPING is 0),
   * and an idle one sleeps one loop turn later.
   *
   * No wake-up is lost: the sequence is read before SLEEPING is set and WRITE is read after it
   * (see `wake`), so a record committed after that last read comes with a wake that either
   * changes the sequence before the wait (which then returns at once) or notifies it.
   */
  async serve(drain: () => void, yieldTurn: () => Promise<void> = nextTurn): Promise<void> {
    const header = this.header;
    while (Atomics.load(header, CLOSED) === 0) {
      drain();
      await yieldTurn();
      if (Atomics.load(header, WRITE) !== this.read) continue;
      const seq = Atomics.load(header, SEQ);
      Atomics.store(header, SLEEPING, 1);
      if (Atomics.load(header, WRITE) === this.read && Atomics.load(header, CLOSED) === 0) {
        const waited = waitAsync(header, SEQ, seq);
        if (waited.async) await waited.value;
      }
      Atomics.store(header, SLEEPING, 0);
    }
  }

  /** Producer or owner: stop the consumer's `serve`, woken whether it sleeps or not. */
  close(): void {
    Atomics.store(this.header, CLOSED, 1);
    Atomics.add(this.header, SEQ, 1);
    Atomics.notify(this.header, SEQ);
  }
}

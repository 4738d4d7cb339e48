import type { Socket } from "node:net";

/** write backlog past which reading stops until it drains (CVE-2019-9517) */
const WRITE_HIGH_WATER = 256 * 1024;
/** the part of a read's output written as a copy rather than handing over the buffer */
const COPY_BELOW = 4096;

/**
 * A connection's frames to send, gathered in one buffer: whatever one read (or one turn of
 * answers from elsewhere) produces leaves in one socket write. While the client does not
 * read, the socket stops reading too, so what is held for it stays bounded.
 */
export class FrameOutput {
  out = Buffer.allocUnsafe(16 * 1024);
  private length = 0;
  /** a flush is due at the end of the current read, not in a microtask */
  inRead = false;
  private flushQueued = false;
  /** ms since the epoch when reading stopped for the backlog; 0: reading */
  pausedAt = 0;

  constructor(private readonly socket: Socket) {
    socket.on("drain", () => this.resume());
  }

  /** `n` bytes at the returned offset of `out` (read `out` after this call: it may be replaced). */
  reserve(n: number): number {
    if (this.length + n > this.out.length) {
      const bigger = Buffer.allocUnsafe(Math.max(this.out.length * 2, this.length + n));
      this.out.copy(bigger, 0, 0, this.length);
      this.out = bigger;
    }
    const at = this.length;
    this.length += n;
    if (!this.inRead && !this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(() => this.flush());
    }
    return at;
  }

  emit(bytes: Buffer): void {
    const at = this.reserve(bytes.length);
    bytes.copy(this.out, at);
  }

  flush(): void {
    this.flushQueued = false;
    if (this.length === 0 || this.socket.destroyed) return;
    let data: Buffer;
    if (this.length < COPY_BELOW) data = Buffer.from(this.out.subarray(0, this.length));
    else {
      data = this.out.subarray(0, this.length);
      this.out = Buffer.allocUnsafe(this.out.length);
    }
    this.length = 0;
    this.socket.write(data);
    if (this.socket.writableLength > WRITE_HIGH_WATER && this.pausedAt === 0) {
      // The client does not read what it asks for: neither do we, until it does.
      this.pausedAt = Date.now();
      this.socket.pause();
    }
  }

  private resume(): void {
    if (this.pausedAt === 0 || this.socket.destroyed) return;
    this.pausedAt = 0;
    this.socket.resume();
  }
}

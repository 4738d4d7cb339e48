import { randomBytes } from "node:crypto";

/**
 * Origins for new states (StoredState.origin): non-zero u32s from xorshift32, seeded per
 * process so two nodes do not draw the same sequence. Uniqueness matters only between
 * states of one key; a collision (2^-32 per pair) would make a sum a max.
 */
export class OriginSource {
  private x = randomBytes(4).readUInt32LE(0) | 1;

  next(): number {
    let x = this.x;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.x = x;
    return x >>> 0 || 1;
  }
}

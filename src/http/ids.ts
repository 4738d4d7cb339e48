import { randomBytes } from "node:crypto";

/**
 * Response ids unique across the cluster without coordination: 60 random bits chosen at
 * start-up (a node's collision chance with another node is ~n²/2⁶¹) followed by a
 * per-process counter. Base-36 keeps them short: `req_k3j9x0a1b2c3_1f`.
 */
export class IdGenerator {
  private readonly prefixOk: string;
  private readonly prefixErr: string;
  private counter = 0;

  constructor() {
    const tag = randomBytes(8).readBigUInt64BE() >> 4n;
    const node = tag.toString(36).padStart(12, "0");
    this.prefixOk = `req_${node}_`;
    this.prefixErr = `err_${node}_`;
  }

  ok(): string {
    return this.prefixOk + (this.counter++).toString(36);
  }

  error(): string {
    return this.prefixErr + (this.counter++).toString(36);
  }
}

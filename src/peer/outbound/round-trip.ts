import { decodePong } from "../wire/messages.js";

/** What the PONGs of one connection tell: the round trip, and the peer's wall clock against ours. */
export class RoundTrip {
  /** Last PING round trip in ms; NaN until measured. */
  rttMs = NaN;
  /**
   * The peer's wall clock minus this node's (ms), estimated at the last PONG to within half
   * a round trip; NaN until measured (or when the peer sends no wall clock).
   */
  clockOffsetMs = NaN;
  private readonly pong = { echoMs: 0, wallMs: 0, tag: "" };

  /** The tag of the last PONG: the peer's policy version ("" from a peer that tells none). */
  get tag(): string {
    return this.pong.tag;
  }

  /** The timestamp the last PONG echoed: when (performance.now()) its PING was sent. */
  get echoMs(): number {
    return this.pong.echoMs;
  }

  /** Read a PONG that arrived at `nowMs` (performance.now()) and `wallNowMs` (Date.now()); returns the round trip. */
  measure(body: Buffer, nowMs: number, wallNowMs: number): number {
    decodePong(body, this.pong);
    this.rttMs = nowMs - this.pong.echoMs;
    // The peer read its clock about half a round trip before this one.
    this.clockOffsetMs = this.pong.wallMs + this.rttMs / 2 - wallNowMs;
    return this.rttMs;
  }
}

// Every error the peer channel reports, defined once with a stable code.

export type PeerErrorCode =
  | "timeout" // the peer did not answer by the request's deadline
  | "unavailable" // no authenticated connection to the peer (down, connecting, or lost while waiting)
  | "invalid" // the decision cannot be encoded: a string over 65535 UTF-8 bytes, an algorithm code not a u8, limit, duration or cost not a u32
  | "too_large" // a call() payload does not fit in one frame
  | "remote" // the peer's call handler failed; message is the peer's
  | "closed" // the client was closed by its owner
  | "protocol"; // the peer broke the framing or handshake rules

export class PeerError extends Error {
  readonly code: PeerErrorCode;
  constructor(code: PeerErrorCode, message: string) {
    super(message);
    this.name = "PeerError";
    this.code = code;
  }
}

/** Raised by the frame decoder and message decoders; the connection is closed on sight. */
export class FrameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FrameError";
  }
}

/** A frame after the handshake whose tag is not the next one in sequence: forged, altered, replayed, reordered or injected. */
export class FrameAuthError extends FrameError {
  constructor() {
    super("frame authentication failed");
    this.name = "FrameAuthError";
  }
}

// The hot path answers a whole batch with the same error when a peer is slow
// or gone, at request rate. Capturing a stack per waiter would cost more than
// the decision itself, so decide() callbacks get these shared, frozen
// instances. Callers read `.code`; they must not mutate them.
export const TIMEOUT_ERROR: PeerError = Object.freeze(new PeerError("timeout", "peer did not answer by the deadline"));
export const UNAVAILABLE_ERROR: PeerError = Object.freeze(new PeerError("unavailable", "peer connection is not up"));
export const INVALID_ERROR: PeerError = Object.freeze(
  new PeerError("invalid", "decision not encodable: string over 65535 bytes, or algorithm/limit/duration out of range"),
);
export const CLOSED_ERROR: PeerError = Object.freeze(new PeerError("closed", "peer client closed"));

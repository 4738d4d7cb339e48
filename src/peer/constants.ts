// Wire constants and defaults of the peer channel, in one place so both ends
// (and anyone reading a packet capture) agree on them.

/** Frame types (the `u8 type` after the length). Anything else closes the connection. */
export const FrameType = {
  HELLO: 1, // client → server: nonceC, clientNodeId
  CHALLENGE: 2, // server → client: nonceS, serverMac, serverNodeId
  PROOF: 3, // client → server: clientMac
  READY: 4, // server → client: empty; the connection is now authenticated
  PING: 5, // client → server: f64 timestamp
  PONG: 6, // server → client: the PING's timestamp echoed
  DECIDE: 7, // client → server: a batch of decision requests
  DECIDE_REPLY: 8, // server → client: one answer per item of one DECIDE
  CALL: 9, // client → server: cold-path opaque request
  CALL_REPLY: 10, // server → client: its opaque answer or an error message
} as const;
export type FrameTypeCode = (typeof FrameType)[keyof typeof FrameType];
export const MAX_FRAME_TYPE = 10;

/** `u32 length` counts the type byte and the payload, not itself. */
export const FRAME_HEADER_BYTES = 5;

/** Largest accepted `length`; a bigger one closes the connection before its body arrives. */
export const MAX_FRAME_BYTES = 1024 * 1024;

/**
 * Largest frame accepted before the handshake completes. The HMAC handshake
 * frames are < 1 KiB; a small cap keeps an unauthenticated socket from making
 * us buffer a megabyte.
 */
export const MAX_HANDSHAKE_FRAME_BYTES = 4096;

/** Nonce and HMAC-SHA256 sizes in the handshake. */
export const NONCE_BYTES = 32;
export const MAC_BYTES = 32;
/** Node ids travel as u16 length + UTF-8; more than this is refused. */
export const MAX_NODE_ID_BYTES = 1024;

/**
 * Labels that make the two proofs of the handshake distinct, so a server's
 * proof can never be reflected back as a client's (same length on purpose:
 * label ‖ nonce ‖ nonce then has one parse).
 */
export const SERVER_PROOF_LABEL = "ringlimit/server";
export const CLIENT_PROOF_LABEL = "ringlimit/client";

/** Algorithm codes on the wire (`u8 algorithm`), index = code. */
export const ALGORITHMS = ["fixed-window", "sliding-window", "token-bucket", "leaky-bucket"] as const;
export type AlgorithmName = (typeof ALGORITHMS)[number];
export const MAX_ALGORITHM = ALGORITHMS.length - 1;

/** `u8 code` of a DECIDE_REPLY item. */
export const DecideCode = { ALLOWED: 0, BLOCKED: 1, ERROR: 2 } as const;

/** Fixed part of one DECIDE item: reqId u32, algorithm u8, limit u32, duration u32, nsLen u16, idLen u16. */
export const DECIDE_ITEM_FIXED_BYTES = 17;
/** One DECIDE_REPLY item: reqId u32, code u8, remaining u32, resetTime u32, retryAfterMs f64. */
export const DECIDE_REPLY_ITEM_BYTES = 21;
/** u32 item count at the start of DECIDE and DECIDE_REPLY bodies. */
export const BATCH_COUNT_BYTES = 4;
/** ns and identifier lengths are u16 on the wire. */
export const MAX_STRING_BYTES = 0xffff;

/** CALL body prefix: callId u32, method u16. CALL_REPLY prefix: callId u32, status u8. */
export const CALL_HEADER_BYTES = 6;
export const CALL_REPLY_HEADER_BYTES = 5;
export const CallStatus = { OK: 0, ERROR: 1 } as const;
/** Error messages in CALL_REPLY are cut to this many bytes. */
export const MAX_CALL_ERROR_BYTES = 1024;

/**
 * Hard limit on the time a server gives a new connection to complete the
 * HMAC handshake. The client uses the same limit for its side.
 */
export const HANDSHAKE_TIMEOUT_MS = 10_000;

/** Defaults for PeerServer and PeerClient options. */
export const PEER_DEFAULTS = Object.freeze({
  handshakeTimeoutMs: HANDSHAKE_TIMEOUT_MS, // ms, server and client
  idleTimeoutMs: 5_000, // ms, server: an authenticated connection silent this long is closed (clients ping every 200 ms)
  maxPendingHandshakes: 256, // count, server: unauthenticated connections beyond this are dropped on accept
  timeoutMs: 100, // ms, client: deadline of one decide() (the service's PEER_TIMEOUT_MS)
  heartbeatIntervalMs: 200, // ms, client: PING period
  failureTimeoutMs: 1_000, // ms, client: no frame received this long ⇒ 'down'
  reconnectMinMs: 50, // ms, client: first reconnect delay
  reconnectMaxMs: 2_000, // ms, client: cap of the exponential backoff
  callTimeoutMs: 5_000, // ms, client: default deadline of call() (cold path)
});

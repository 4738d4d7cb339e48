// Public surface of the peer channel. Everything else in src/peer is internal.

export { PeerServer } from "./peer-server.js";
export type { PeerServerHandler, PeerServerOptions, PeerServerStats } from "./peer-server.js";
export { PeerClient } from "./peer-client.js";
export type { PeerClientOptions, PeerClientState } from "./peer-client.js";
export type { DecideCallback } from "./pending-requests.js";
export { MAX_CALL_PAYLOAD_BYTES } from "./messages.js";
export type { DecideResult } from "./messages.js";
export { PeerError } from "./errors.js";
export type { PeerErrorCode } from "./errors.js";
export type { PeerLogger } from "./logger.js";
export type { PeerTlsOptions } from "./transport.js";
export { DecideCode, HANDSHAKE_TIMEOUT_MS, MAX_FRAME_BYTES, PEER_DEFAULTS } from "./constants.js";

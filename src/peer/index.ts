// Public surface of the peer channel. Everything else in src/peer is internal.

export { PeerServer } from "./inbound/peer-server.js";
export type { PeerServerHandler, PeerServerOptions, PeerServerStats } from "./inbound/peer-server.js";
export { PeerClient } from "./outbound/peer-client.js";
export { processLoopLag } from "./outbound/loop-lag.js";
export type { PeerClientOptions, PeerClientState } from "./outbound/peer-client.js";
export type { DecideCallback } from "./outbound/pending-requests.js";
export { MAX_CALL_PAYLOAD_BYTES, newDecideResult } from "./wire/messages.js";
export type { DecideQuery, DecideResult } from "./wire/messages.js";
export { PeerError } from "./errors.js";
export type { PeerErrorCode } from "./errors.js";
export type { PeerLogger } from "./logger.js";
export type { PeerTlsOptions } from "./link/transport.js";
export { ownRange, rangeText, sharedVersion, supportsAt } from "./link/versions.js";
export type { ProtocolRange, SoftwareFacts } from "./link/versions.js";
export type { ProtocolFeature } from "./wire/constants.js";
export {
  DecideCode,
  DecideFlag,
  DecideItemFlag,
  HANDSHAKE_TIMEOUT_MS,
  MAX_FRAME_BYTES,
  PEER_DEFAULTS,
  PROTOCOL_MIN,
  PROTOCOL_VERSION,
} from "./wire/constants.js";

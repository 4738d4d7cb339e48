// What a PeerClient is told: where its peer is, who both ends are, and its timings.

import type { PeerLogger } from "../logger.js";
import type { PeerTlsOptions } from "../link/transport.js";
import type { ProtocolRange } from "../link/versions.js";

export type PeerClientState = "connecting" | "up" | "down";

export interface PeerClientOptions {
  host: string;
  port: number;
  /** CLUSTER_SECRET. */
  secret: string;
  /** This node's id, sent in HELLO. */
  nodeId: string;
  /**
   * The id of the node at host:port (the member's name on the ring). The handshake binds
   * it: a server with any other id, or anyone relaying to one, is refused.
   */
  serverNodeId: string;
  /** ms, deadline of one decide() (PEER_TIMEOUT_MS). */
  timeoutMs: number;
  /** ms between PINGs (HEARTBEAT_INTERVAL_MS). */
  heartbeatIntervalMs: number;
  /** ms without any frame received before 'down' (FAILURE_TIMEOUT_MS). */
  failureTimeoutMs: number;
  /** ms, first reconnect delay; default 50. */
  reconnectMinMs?: number;
  /** ms, cap of the exponential reconnect backoff; default 2 000. */
  reconnectMaxMs?: number;
  /** ms for TCP/TLS connect plus the handshake; default 2 000. */
  handshakeTimeoutMs?: number;
  /** ms, default deadline of call(); default 5 000. */
  callTimeoutMs?: number;
  tls?: PeerTlsOptions;
  logger?: PeerLogger;
  /** the protocol versions this node speaks (PEER_PROTOCOL_MAX holds the top); default ownRange() */
  protocol?: ProtocolRange;
  /** this node's members tag, told with the range on each connection (protocol-ranges.ts); default none */
  membersTag?: () => string;
}

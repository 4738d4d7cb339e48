import { readFileSync } from "node:fs";
import type { Config } from "../../config.js";
import type { PeerTlsOptions } from "../../peer/index.js";

export interface PeerTls {
  /** the peer listener's certificate and key */
  server: PeerTlsOptions | undefined;
  /** what the peer clients trust: PEER_TLS_CA_FILE, or the node's own certificate */
  client: PeerTlsOptions | undefined;
}

/** Read the peer channel's TLS files once, when the node is composed; a missing file fails the start. */
export function readPeerTls(config: Config): PeerTls {
  const { peerTlsCertFile: cert, peerTlsKeyFile: key, peerTlsCaFile: ca } = config;
  return {
    server: cert !== undefined && key !== undefined ? { cert: readFileSync(cert), key: readFileSync(key) } : undefined,
    client: ca !== undefined || cert !== undefined ? { ca: readFileSync(ca ?? cert!), rejectUnauthorized: true } : undefined,
  };
}

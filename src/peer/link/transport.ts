// Plain TCP or TLS under the peer channel. The HMAC handshake runs on top of
// either, so TLS adds confidentiality and integrity, not membership.

import net from "node:net";
import tls from "node:tls";

export interface PeerTlsOptions {
  /** Server: certificate chain (PEM). */
  cert?: string | Buffer;
  /** Server: private key (PEM). */
  key?: string | Buffer;
  /** Client: CAs trusted for the server's certificate (PEM); the system store when omitted. */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Client: refuse servers whose certificate does not chain to `ca`. Default true. */
  rejectUnauthorized?: boolean;
}

export type PeerSocket = net.Socket | tls.TLSSocket;

/**
 * A listener whose `onSocket` sees a socket ready for the peer handshake: at
 * TCP accept for plain TCP, after the TLS handshake (bounded by
 * `handshakeTimeoutMs` too) for TLS. For TLS, `onTcp` sees each TCP
 * connection as it is accepted, before its TLS handshake.
 */
export function createListener(
  tlsOpts: PeerTlsOptions | undefined,
  handshakeTimeoutMs: number,
  onSocket: (socket: PeerSocket) => void,
  onTcp: (raw: net.Socket) => void,
): net.Server {
  if (tlsOpts === undefined) return net.createServer({ noDelay: true }, onSocket);
  if (tlsOpts.cert === undefined || tlsOpts.key === undefined) {
    throw new TypeError("peer server TLS needs cert and key");
  }
  const server = tls.createServer({ cert: tlsOpts.cert, key: tlsOpts.key, handshakeTimeout: handshakeTimeoutMs }, onSocket);
  server.on("connection", onTcp);
  // A failed TLS handshake from a stranger is not our error; without a
  // listener Node would only log it, with one we keep it quiet.
  server.on("tlsClientError", (_err, socket) => socket.destroy());
  return server;
}

/**
 * Open a connection; `onOpen` fires when the HMAC handshake may start (after
 * the TLS handshake for TLS).
 */
export function connectSocket(host: string, port: number, tlsOpts: PeerTlsOptions | undefined, onOpen: () => void): PeerSocket {
  if (tlsOpts === undefined) {
    const socket = net.connect({ host, port, noDelay: true });
    socket.once("connect", onOpen);
    return socket;
  }
  const socket = tls.connect({
    host,
    port,
    ca: tlsOpts.ca,
    rejectUnauthorized: tlsOpts.rejectUnauthorized ?? true,
    // Members are named by address (static list or DNS answers), not by a
    // host name the certificate could vouch for, so the certificate's name is
    // not checked; its chain still is, and the HMAC proof says the peer holds
    // the cluster secret.
    checkServerIdentity: () => undefined,
  });
  socket.setNoDelay(true);
  socket.once("secureConnect", onOpen);
  return socket;
}

import { readFileSync, statSync } from "node:fs";
import http2, { type SecureServerOptions } from "node:http2";
import {
  checkServerIdentity,
  createSecureContext,
  type PeerCertificate,
  type SecureContextOptions,
  type Server,
  type TlsOptions,
  type TLSSocket,
} from "node:tls";
import { certificatesOf } from "../../config/parsers.js";
import type { Logger } from "../../logger.js";

/** How often the certificate files are stat'ed for a change (a Secret volume's symlink swap). */
export const TLS_CHECK_INTERVAL_MS = 1000;

export interface GrpcTlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  /** set: every caller must present a certificate that chains to this CA (GRPC_SERVER_TLS_CA_CERT) */
  readonly caFile?: string;
  /** set: and that certificate must carry this DNS name or IP address (GRPC_CLIENT_TLS_SAN) */
  readonly clientSan?: string;
}

/**
 * The gRPC port's TLS (GRPC_SERVER_USE_TLS, or TLS_CERT_FILE): the HTTP/2 server with the
 * node's certificate and, with a CA, client certificates required and verified in the
 * handshake (a caller without one never reaches a handler: this replaces the API key).
 * The files are stat'ed every TLS_CHECK_INTERVAL_MS, symlinks followed, so a Kubernetes
 * Secret's rotation (the kubelet swaps a symlink) is seen; a change is read whole and
 * swapped in for new connections with setSecureContext, and files that do not make a
 * context (a swap half done, a key that does not match) are skipped until the next change.
 */
export class GrpcTls {
  readonly server: Server;
  private fingerprint: string;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly files: GrpcTlsFiles,
    private readonly logger: Logger,
    /** the gRPC port's bounds on the server itself (grpc-server.ts: HTTP/2 settings, the handshake's timeout) */
    serverOptions: Pick<SecureServerOptions, "settings" | "handshakeTimeout"> = {},
    /** the TLS server to keep, made with tlsServerOptions(files) (the own HTTP/2's); unset: a node:http2 one */
    server?: Server,
  ) {
    this.fingerprint = fingerprintOf(files);
    this.server = server ?? http2.createSecureServer({ ...serverOptions, ...tlsServerOptions(files) });
    if (files.clientSan !== undefined) {
      const san = files.clientSan;
      // before the server's own listener: a connection refused here never reaches a handler
      this.server.prependListener("secureConnection", (socket: TLSSocket) => {
        // The chain is verified already; the name is ours to check (Node checks none on a server).
        if (checkServerIdentity(san, socket.getPeerCertificate() as PeerCertificate) !== undefined) socket.destroy();
      });
    }
    this.timer = setInterval(() => this.check(), TLS_CHECK_INTERVAL_MS);
    this.timer.unref();
  }

  /** Reads the files again if they changed; true when a new context is in use. */
  check(): boolean {
    const now = fingerprintOf(this.files);
    if (now === this.fingerprint) return false;
    let options: SecureContextOptions;
    try {
      options = contextOptions(this.files);
      createSecureContext(options);
    } catch (err) {
      // Not recorded as seen: tried again at the next tick, when the swap may be complete.
      this.logger.warn({ err: (err as Error).message }, "gRPC TLS files changed but do not load; the previous certificate stays");
      return false;
    }
    this.fingerprint = now;
    this.server.setSecureContext(options);
    this.logger.info({ certFile: this.files.certFile }, "gRPC TLS certificate reloaded");
    return true;
  }

  close(): void {
    clearInterval(this.timer);
  }
}

/** The TLS options of the port's server: the node's certificate, and with a CA, client certificates required and verified. */
export function tlsServerOptions(files: GrpcTlsFiles): TlsOptions {
  return { ...contextOptions(files), requestCert: files.caFile !== undefined, rejectUnauthorized: files.caFile !== undefined };
}

function contextOptions(files: GrpcTlsFiles): SecureContextOptions {
  return {
    cert: readFileSync(files.certFile),
    key: readFileSync(files.keyFile),
    ...(files.caFile !== undefined ? { ca: certificatesOf(readFileSync(files.caFile)) } : {}),
  };
}

function fingerprintOf(files: GrpcTlsFiles): string {
  return [files.certFile, files.keyFile, files.caFile]
    .map((file) => {
      if (file === undefined) return "";
      try {
        const s = statSync(file);
        return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}`;
      } catch (err) {
        return (err as NodeJS.ErrnoException).code ?? "error";
      }
    })
    .join("|");
}

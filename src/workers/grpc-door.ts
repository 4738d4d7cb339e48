import net from "node:net";
import type { Config } from "../config.js";
import { grpcClientCa } from "../config/envoy-ratelimit.js";
import { RlsGrpcServer, type GrpcDeps, type GrpcOptions, type WatchBudget } from "../rls/grpc/grpc-server.js";
import { MAX_WATCHES } from "../rls/health-service.js";
import type { GrpcTlsFiles } from "../rls/grpc/grpc-tls.js";
import { RingGrpcServer } from "../rls/grpc/ring-grpc-server.js";
import type { RlsServiceOptions } from "../rls/rls-service.js";

/**
 * The gRPC port (GRPC_PORT) as the main thread (WORKERS=1) or each worker thread (WORKERS > 1)
 * serves it: one mapping from the settings to the server's options, so the threads cannot
 * serve it differently.
 *
 * With WORKERS > 1 every worker listens on the port itself with SO_REUSEPORT and the kernel
 * spreads connections over them (docs/architecture.md, Threads, says why not a hand-over).
 */
export type GrpcDoor = RlsGrpcServer | RingGrpcServer;

/**
 * The port's options; `share` (WORKERS > 1): this thread's part of the node's bounds,
 * SO_REUSEPORT, and the node's drain word (GrpcOptions.refusing).
 */
export function grpcOptionsOf(config: Config, share?: { port: number; threads: number; refusing: () => boolean }): GrpcOptions {
  // The node's caps hold for the sum of its threads: each takes its part, at least one.
  const part = (n: number): number => (share === undefined ? n : Math.max(1, Math.floor(n / share.threads)));
  return {
    host: config.host,
    port: share?.port ?? config.grpcPort ?? 0,
    ...(share !== undefined ? { reusePort: true, refusing: share.refusing } : {}),
    // A client certificate verified in the handshake replaces the API key (docs/envoy-gateway.md).
    auth: config.grpcAuth === "none" || grpcClientCa(config) !== undefined ? "none" : "api-key",
    ...grpcTlsOf(config),
    limits: {
      maxConnections: part(config.grpcMaxConnections),
      maxConcurrentStreams: config.grpcMaxConcurrentStreams,
      prefaceTimeoutMs: config.grpcPrefaceTimeoutMs,
      idleTimeoutMs: config.grpcIdleTimeoutMs,
      defaultDeadlineMs: config.grpcDefaultDeadlineMs,
      maxPendingBytes: part(config.grpcMaxPendingBytes),
    },
  };
}

/**
 * The node's Watch streams, counted by every worker in shared words: [0] the node's, [1 + i]
 * worker i's own, so that the owner gives back what a worker that died held (releaseWatches).
 */
export const watchWords = (workers: number): Int32Array => new Int32Array(new SharedArrayBuffer(4 * (1 + workers)));

/** Worker `index`'s side: a place is taken in the node's count first and given back if that is full. */
export function sharedWatchBudget(words: Int32Array, index: number): WatchBudget {
  return {
    take() {
      // invariant: words[0] <= MAX_WATCHES once every take() has returned
      if (Atomics.add(words, 0, 1) >= MAX_WATCHES) {
        Atomics.sub(words, 0, 1);
        return false;
      }
      Atomics.add(words, 1 + index, 1);
      return true;
    },
    give() {
      Atomics.sub(words, 1 + index, 1);
      Atomics.sub(words, 0, 1);
    },
  };
}

/** The owner, once worker `index` has exited: the places it held are the node's again. */
export function releaseWatches(words: Int32Array, index: number): void {
  Atomics.sub(words, 0, Atomics.exchange(words, 1 + index, 0));
}

/** The RLS service's settings, one mapping for the main thread and every worker. */
export function rlsServiceOptionsOf(config: Config): RlsServiceOptions {
  return {
    failOpen: config.failOpen,
    shadowMode: config.shadowMode,
    allOrNothing: config.rlsAllOrNothing,
    countBlocked: config.rlsCountBlocked,
    quotaMode: config.quotaMode,
    responseDynamicMetadata: config.responseDynamicMetadata,
    rateLimitHeaders: config.rlsRateLimitHeaders,
  };
}

/**
 * GRPC_SERVER_IMPL: ringlimit's own HTTP/2 (src/rls/h2), or node:http2 to fall back on; both
 * serve every TLS configuration (client certificates, rotation).
 */
export function createGrpcDoor(config: Config, options: GrpcOptions, deps: GrpcDeps): GrpcDoor {
  return config.grpcServerImpl === "node-http2" ? new RlsGrpcServer(options, deps) : new RingGrpcServer(options, deps, options.limits);
}

/**
 * WORKERS > 1, on the main thread: binds the gRPC port exclusively and lets it go, resolving
 * with the port (GRPC_PORT=0 picks one here, which every worker then shares). This is the
 * guard a single thread's exclusive bind gives: a port that any socket holds, with or without
 * SO_REUSEPORT (another ringlimit's workers included), fails the start here. What it cannot
 * stop is a process of the same user that binds with SO_REUSEPORT after this moment: Linux
 * lets it join the workers' group and take a share of the connections (docs/security.md).
 */
export function reserveGrpcPort(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen({ port, host, exclusive: true }, () => {
      const bound = (probe.address() as net.AddressInfo).port;
      probe.close(() => resolve(bound));
    });
  });
}

/** The gRPC port's TLS: GRPC_SERVER_USE_TLS's files (and client CA), else the node's TLS_CERT_FILE, else none. */
function grpcTlsOf(config: Config): { tls?: GrpcTlsFiles } {
  const ca = grpcClientCa(config);
  if (config.grpcServerUseTls && config.grpcServerTlsCert !== undefined && config.grpcServerTlsKey !== undefined) {
    return {
      tls: {
        certFile: config.grpcServerTlsCert,
        keyFile: config.grpcServerTlsKey,
        ...(ca !== undefined ? { caFile: ca } : {}),
        ...(ca !== undefined && config.grpcClientTlsSan !== undefined ? { clientSan: config.grpcClientTlsSan } : {}),
      },
    };
  }
  return config.tlsCertFile !== undefined && config.tlsKeyFile !== undefined ? { tls: { certFile: config.tlsCertFile, keyFile: config.tlsKeyFile } } : {};
}

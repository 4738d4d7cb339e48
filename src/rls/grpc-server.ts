import { readFileSync } from "node:fs";
import { Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData, type ServiceDefinition } from "@grpc/grpc-js";
import { KeyScope, type ApiKeyVerifier } from "../http/auth.js";
import type { Logger } from "../logger.js";
import { RLS_ERRORS, type RlsFailure } from "./errors.js";
import { HealthService } from "./health-service.js";
import { decodeHealthCheckRequest, decodeRateLimitRequest, encodeHealthCheckResponse, encodeRateLimitResponse } from "./codec.js";
import { HEALTH_SERVICE_NAME, RLS_SERVICE_NAME } from "./protos.js";
import type { RlsService } from "./rls-service.js";
import type { RlsRequest, RlsResponse } from "./wire.js";

export interface GrpcOptions {
  host: string;
  /** 0: any free port */
  port: number;
  /** TLS_CERT_FILE / TLS_KEY_FILE: the node's certificate serves both ports; unset: plaintext HTTP/2 */
  tls?: { certFile: string; keyFile: string };
  /** GRPC_AUTH: "api-key" asks every call for `authorization: Bearer <key>`; "none" trusts the network (an mTLS mesh) */
  auth: "api-key" | "none";
}

export interface GrpcDeps {
  service: RlsService;
  verifier: ApiKeyVerifier;
  /** the node's readiness (GET /ready), which grpc.health.v1 reports */
  isReady: () => boolean;
  logger: Logger;
}

/**
 * The two services, with the hand-written codec of codec.ts rather than protobuf.js objects:
 * same bytes on the wire (test/rls/ calls them with a client generated from the .proto files),
 * measured cheaper per call (bench/rls.mjs).
 */
const unused = (): never => {
  throw new Error("server side only");
};
const RLS_DEFINITION: ServiceDefinition = {
  ShouldRateLimit: {
    path: `/${RLS_SERVICE_NAME}/ShouldRateLimit`,
    requestStream: false,
    responseStream: false,
    requestSerialize: unused,
    requestDeserialize: decodeRateLimitRequest,
    responseSerialize: encodeRateLimitResponse,
    responseDeserialize: unused,
  },
};
const HEALTH_DEFINITION: ServiceDefinition = {
  Check: {
    path: `/${HEALTH_SERVICE_NAME}/Check`,
    requestStream: false,
    responseStream: false,
    requestSerialize: unused,
    requestDeserialize: decodeHealthCheckRequest,
    responseSerialize: encodeHealthCheckResponse,
    responseDeserialize: unused,
  },
  Watch: {
    path: `/${HEALTH_SERVICE_NAME}/Watch`,
    requestStream: false,
    responseStream: true,
    requestSerialize: unused,
    requestDeserialize: decodeHealthCheckRequest,
    responseSerialize: encodeHealthCheckResponse,
    responseDeserialize: unused,
  },
};

/** Envoy's requests are a few hundred bytes; anything near this bound is not one. */
const MAX_MESSAGE_BYTES = 1 << 20;

/**
 * The gRPC port (GRPC_PORT): envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit on
 * @grpc/grpc-js, and grpc.health.v1.Health. Serves until close(); a drain turns health to
 * NOT_SERVING first, so Envoy and Kubernetes stop sending before the port closes.
 */
export class RlsGrpcServer {
  private readonly server = new Server({ "grpc.max_receive_message_length": MAX_MESSAGE_BYTES });
  private readonly health: HealthService;
  private draining = false;
  /** calls received and not answered yet (a drain waits for 0) */
  inFlight = 0;

  constructor(
    private readonly options: GrpcOptions,
    private readonly deps: GrpcDeps,
  ) {
    this.health = new HealthService(() => !this.draining && deps.isReady());
    this.server.addService(RLS_DEFINITION, {
      ShouldRateLimit: (call: ServerUnaryCall<RlsRequest, RlsResponse>, cb: sendUnaryData<RlsResponse>) => this.shouldRateLimit(call, cb),
    });
    this.server.addService(HEALTH_DEFINITION, this.health.implementation());
  }

  /** Resolves with the bound port. */
  listen(): Promise<number> {
    const { host, port, tls } = this.options;
    const credentials =
      tls === undefined
        ? ServerCredentials.createInsecure()
        : ServerCredentials.createSsl(null, [{ cert_chain: readFileSync(tls.certFile), private_key: readFileSync(tls.keyFile) }], false);
    const address = `${host.includes(":") ? `[${host}]` : host}:${port}`;
    return new Promise((resolve, reject) => {
      this.server.bindAsync(address, credentials, (err, bound) => (err === null ? resolve(bound) : reject(err)));
    });
  }

  private shouldRateLimit(call: ServerUnaryCall<RlsRequest, RlsResponse>, callback: sendUnaryData<RlsResponse>): void {
    let scope: KeyScope | undefined = KeyScope.ANY;
    if (this.options.auth === "api-key") {
      const values = call.metadata.get("authorization");
      const header = values.length === 1 && typeof values[0] === "string" ? values[0] : "";
      scope = this.deps.verifier.scopeOf(header);
      if (scope === undefined) return callback({ code: RLS_ERRORS.unauthenticated.grpc, details: RLS_ERRORS.unauthenticated.message });
    }
    this.inFlight++;
    let answered = false;
    const done = (failure: RlsFailure | undefined, response: RlsResponse | undefined): void => {
      if (answered) return;
      answered = true;
      this.inFlight--;
      if (failure !== undefined) callback({ code: RLS_ERRORS[failure.kind].grpc, details: failure.message });
      else callback(null, response);
    };
    try {
      this.deps.service.shouldRateLimit(call.request, scope, done);
    } catch (err) {
      // A fault in one call answers that call; the message stays in the log, not the answer.
      this.deps.logger.error({ err }, "RLS call failed");
      done({ kind: "internal", message: RLS_ERRORS.internal.message }, undefined);
    }
  }

  /** Health turns NOT_SERVING; calls are still answered until close(). */
  startDraining(): void {
    this.draining = true;
    this.health.poll();
  }

  /** Stops accepting calls and ends the ones left after `graceMs`. */
  close(graceMs: number): Promise<void> {
    this.health.close();
    return new Promise((resolve) => {
      const force = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      force.unref();
      this.server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
  }
}

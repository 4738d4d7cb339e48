import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadSync, type Options } from "@grpc/proto-loader";
import type { PackageDefinition } from "@grpc/proto-loader";

const HERE = path.dirname(fileURLToPath(import.meta.url));

/**
 * Where the .proto files are at run time: copied next to the compiled code by the build
 * (dist/src/rls/proto), else in the sources of the package root (src/rls/proto). They
 * ship in the package; clients may load them from here too (docs/envoy.md).
 */
export const PROTO_DIR: string =
  [path.join(HERE, "proto"), path.resolve(HERE, "../../../src/rls/proto")].find((dir) => existsSync(dir)) ?? path.join(HERE, "proto");

export const RLS_PROTO = "envoy/service/ratelimit/v3/rls.proto";
export const HEALTH_PROTO = "grpc/health/v1/health.proto";

export const RLS_SERVICE_NAME = "envoy.service.ratelimit.v3.RateLimitService";
export const HEALTH_SERVICE_NAME = "grpc.health.v1.Health";

/**
 * How the server reads messages: the .proto's own field names, 64-bit integers as numbers
 * (a hits_addend past 2^53 is over any limit anyway), enums as numbers, unset fields left out.
 */
export const SERVER_LOAD_OPTIONS: Options = Object.freeze({ keepCase: true, longs: Number, enums: Number, defaults: false, oneofs: false });

/** Envoy's rate limit service and the gRPC health service, with google.protobuf's well-known types built in. */
export function loadProtos(options: Options = SERVER_LOAD_OPTIONS): PackageDefinition {
  return loadSync([RLS_PROTO, HEALTH_PROTO], { ...options, includeDirs: [PROTO_DIR] });
}

import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));

/**
 * Where the .proto files are at run time: copied next to the compiled code by the build
 * (dist/src/rls/wire/proto), else in the sources of the package root (src/rls/wire/proto). They
 * ship in the package; clients may be generated from them (docs/envoy.md).
 */
export const PROTO_DIR: string =
  [path.join(HERE, "proto"), path.resolve(HERE, "../../../../src/rls/wire/proto")].find((dir) => existsSync(dir)) ?? path.join(HERE, "proto");

export const RLS_PROTO = "envoy/service/ratelimit/v3/rls.proto";
export const HEALTH_PROTO = "grpc/health/v1/health.proto";

export const RLS_SERVICE_NAME = "envoy.service.ratelimit.v3.RateLimitService";
export const HEALTH_SERVICE_NAME = "grpc.health.v1.Health";

import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadPackageDefinition, type ServiceClientConstructor } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import protobuf from "protobufjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));

/**
 * Where the xDS .proto files are at run time: copied next to the compiled code by the build
 * (dist/src/policy/xds/proto), else in the sources (src/policy/xds/proto).
 */
export const XDS_PROTO_DIR: string =
  [path.join(HERE, "proto"), path.resolve(HERE, "../../../../src/policy/xds/proto")].find((dir) => existsSync(dir)) ?? path.join(HERE, "proto");

export const ADS_PROTO = "envoy/service/discovery/v3/ads.proto";
export const RLS_CONF_PROTO = "ratelimit/config/ratelimit/v3/rls_conf.proto";
/** The resource type Envoy Gateway serves, and the one this client subscribes to. */
export const RATE_LIMIT_CONFIG_TYPE = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/** The messages as decoded here: `.proto` field names, enums by name, 64-bit integers as numbers. */
export const DECODE_OPTIONS = Object.freeze({ keepCase: true, longs: Number, enums: String, defaults: true, oneofs: false, arrays: true });

/** google.protobuf.Any as proto-loader decodes it */
export interface AnyMessage {
  readonly type_url: string;
  readonly value: Buffer;
}

export interface DiscoveryResponseMessage {
  readonly version_info: string;
  readonly resources: readonly AnyMessage[];
  readonly type_url: string;
  readonly nonce: string;
}

export interface XdsProtos {
  /** envoy.service.discovery.v3.AggregatedDiscoveryService's client */
  readonly Ads: ServiceClientConstructor;
  /** a RateLimitConfig resource's bytes, decoded (DECODE_OPTIONS); throws on bytes that are not one */
  decodeRateLimitConfig(bytes: Uint8Array): unknown;
}

let loaded: XdsProtos | undefined;

/** The protos, loaded once (cold path: at the first connection). */
export function xdsProtos(): XdsProtos {
  if (loaded !== undefined) return loaded;
  const definition = loadSync([ADS_PROTO], { includeDirs: [XDS_PROTO_DIR], ...DECODE_OPTIONS });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const Ads = (loadPackageDefinition(definition) as any).envoy.service.discovery.v3.AggregatedDiscoveryService as ServiceClientConstructor;
  // The resource inside Any is decoded with protobufjs itself, which proto-loader is built on.
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => path.join(XDS_PROTO_DIR, target);
  root.loadSync(RLS_CONF_PROTO, { keepCase: true });
  const RateLimitConfig = root.lookupType("ratelimit.config.ratelimit.v3.RateLimitConfig");
  loaded = {
    Ads,
    decodeRateLimitConfig: (bytes) => RateLimitConfig.toObject(RateLimitConfig.decode(bytes), DECODE_OPTIONS),
  };
  return loaded;
}

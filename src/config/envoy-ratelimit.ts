import { bool, certificate, checkTlsFiles, ConfigError, durationMs, int, list, oneOf, str, type Parser } from "./parsers.js";

/**
 * envoyproxy/ratelimit's settings that ringlimit reads, under envoyproxy/ratelimit's own names,
 * so a deployment made for it (Envoy Gateway's: docs/envoy-gateway.md) starts ringlimit
 * unchanged. Part of config.ts's one list of settings (spread into DEFAULTS and VARIABLES).
 */
export const RATELIMIT_DEFAULTS = Object.freeze({
  configType: undefined as string | undefined, // FILE: POLICY_PATH; GRPC_XDS_SOTW: the policy comes over xDS. Set: GRPC_PORT defaults to 8081
  forceStartWithoutInitialConfig: false as boolean, // xDS: serve at once, with no rule until the first config arrives
  healthyWithAtLeastOneConfigLoaded: false as boolean, // GET /healthcheck answers 500 until a config is in force
  xdsServerUrl: "localhost:18000" as string,
  xdsNodeId: "default" as string,
  xdsNodeMetadata: [] as readonly string[], // key=value entries, sent in the node's metadata
  xdsClientHeaders: [] as readonly string[], // key:value entries, sent as gRPC metadata on the xDS stream
  xdsServerUseTls: false as boolean,
  xdsClientTlsCert: undefined as string | undefined,
  xdsClientTlsKey: undefined as string | undefined,
  xdsServerTlsCaCert: undefined as string | undefined, // unset with TLS: the system's CAs
  xdsServerTlsSan: undefined as string | undefined, // the name the server's certificate must carry (unset: the host of the URL)
  xdsBackoffInitialMs: 1000 as number, // first wait before reconnecting; doubles up to the max, with jitter
  xdsBackoffMaxMs: 60_000 as number,
  xdsMaxMessageBytes: (16 * 1024 * 1024) as number, // the largest xDS response accepted
  grpcServerUseTls: false as boolean, // TLS on GRPC_PORT with GRPC_SERVER_TLS_CERT/KEY
  grpcServerTlsCert: undefined as string | undefined,
  grpcServerTlsKey: undefined as string | undefined,
  grpcServerTlsCaCert: undefined as string | undefined, // set: callers must present a certificate from this CA, instead of an API key
  grpcClientTlsCaCert: undefined as string | undefined, // envoyproxy/ratelimit's name for the same CA
  grpcClientTlsSan: undefined as string | undefined, // set: the callers' certificate must carry this name
  usePrometheus: false as boolean, // /metrics on PROMETHEUS_ADDR's port, with envoyproxy/ratelimit's metric names besides ours
  prometheusAddr: ":9090" as string,
  quotaMode: false as boolean, // every RLS rule in quota mode, as quota_mode: true puts one
  responseDynamicMetadata: false as boolean, // RLS answers carry dynamic_metadata (docs/envoy.md)
});

export type RatelimitSettings = { -readonly [K in keyof typeof RATELIMIT_DEFAULTS]: (typeof RATELIMIT_DEFAULTS)[K] };

const upper =
  (values: string[]): Parser =>
  (raw, name) =>
    oneOf(values)(raw.trim().toUpperCase(), name);

export const RATELIMIT_VARIABLES: Record<keyof RatelimitSettings, [env: string, parse: Parser, help: string]> = {
  quotaMode: [
    "QUOTA_MODE",
    bool,
    "every RLS rule in quota mode: OVER_LIMIT only when every quota descriptor of a request is over (a rule's quota_mode: true does it for one)",
  ],
  responseDynamicMetadata: [
    "RESPONSE_DYNAMIC_METADATA",
    bool,
    "RLS answers carry dynamic_metadata: domain, descriptors, hitsAddend and the metadata of the rules that passed (docs/envoy.md)",
  ],
  configType: [
    "CONFIG_TYPE",
    upper(["FILE", "GRPC_XDS_SOTW"]),
    "FILE: policy from POLICY_PATH; GRPC_XDS_SOTW: policy over xDS (docs/envoy-gateway.md); set: GRPC_PORT defaults to 8081",
  ],
  forceStartWithoutInitialConfig: [
    "FORCE_START_WITHOUT_INITIAL_CONFIG",
    bool,
    "with xDS: serve at once, every descriptor matching no rule until the first config arrives (false: wait for it)",
  ],
  healthyWithAtLeastOneConfigLoaded: ["HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", bool, "GET /healthcheck answers 500 until a policy is in force"],
  xdsServerUrl: ["CONFIG_GRPC_XDS_SERVER_URL", str, "host:port of the xDS management server (ADS, state of the world)"],
  xdsNodeId: ["CONFIG_GRPC_XDS_NODE_ID", str, "the node id this client subscribes as"],
  xdsNodeMetadata: ["CONFIG_GRPC_XDS_NODE_METADATA", list, "comma-separated key=value entries of the node's metadata"],
  xdsClientHeaders: ["CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", list, "comma-separated key:value gRPC metadata sent on the xDS stream"],
  xdsServerUseTls: ["CONFIG_GRPC_XDS_SERVER_USE_TLS", bool, "TLS (1.3) to the xDS server, with the client certificate below when set"],
  xdsClientTlsCert: ["CONFIG_GRPC_XDS_CLIENT_TLS_CERT", str, "PEM client certificate for the xDS server (mutual TLS), reread at each connection"],
  xdsClientTlsKey: ["CONFIG_GRPC_XDS_CLIENT_TLS_KEY", str, "PEM private key of CONFIG_GRPC_XDS_CLIENT_TLS_CERT"],
  xdsServerTlsCaCert: ["CONFIG_GRPC_XDS_SERVER_TLS_CACERT", str, "PEM CA the xDS server's certificate must chain to (unset: the system's CAs)"],
  xdsServerTlsSan: ["CONFIG_GRPC_XDS_SERVER_TLS_SAN", str, "the name the xDS server's certificate must carry (unset: the host of CONFIG_GRPC_XDS_SERVER_URL)"],
  xdsBackoffInitialMs: ["XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", durationMs(10, 3_600_000), "first wait before reconnecting to the xDS server (10s, 500ms...)"],
  xdsBackoffMaxMs: ["XDS_CLIENT_BACKOFF_MAX_INTERVAL", durationMs(10, 3_600_000), "longest wait between reconnections to the xDS server"],
  xdsMaxMessageBytes: ["XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", int(1024, 64 * 1024 * 1024), "the largest xDS response accepted, in bytes"],
  grpcServerUseTls: ["GRPC_SERVER_USE_TLS", bool, "TLS on GRPC_PORT with GRPC_SERVER_TLS_CERT / GRPC_SERVER_TLS_KEY (reloaded when the files change)"],
  grpcServerTlsCert: ["GRPC_SERVER_TLS_CERT", str, "PEM certificate of GRPC_PORT when GRPC_SERVER_USE_TLS is true"],
  grpcServerTlsKey: ["GRPC_SERVER_TLS_KEY", str, "PEM private key of GRPC_SERVER_TLS_CERT"],
  grpcServerTlsCaCert: ["GRPC_SERVER_TLS_CA_CERT", str, "PEM CA of the callers' certificates: set, GRPC_PORT asks a client certificate instead of an API key"],
  grpcClientTlsCaCert: ["GRPC_CLIENT_TLS_CACERT", str, "the same as GRPC_SERVER_TLS_CA_CERT (envoyproxy/ratelimit's name)"],
  grpcClientTlsSan: ["GRPC_CLIENT_TLS_SAN", str, "the name (DNS or IP) the callers' certificate must carry"],
  usePrometheus: ["USE_PROMETHEUS", bool, "serve /metrics on PROMETHEUS_ADDR's port, envoyproxy/ratelimit's ratelimit_service_rate_limit_* counters included"],
  prometheusAddr: ["PROMETHEUS_ADDR", str, "[host]:port of /metrics when USE_PROMETHEUS is true (the port is used; the host is HOST)"],
};

/** envoyproxy/ratelimit's gRPC port, and its HTTP port (/healthcheck), which is already PORT's default. */
export const RATELIMIT_GRPC_PORT = 8081;

/**
 * envoyproxy/ratelimit's variables ringlimit does not read, and why (docs/envoy-gateway.md lists
 * them). Known by name, so the start-up check for misspelt variables stays quiet about them.
 */
export const RATELIMIT_IGNORED: Readonly<Record<string, string>> = Object.freeze({
  ...Object.fromEntries(
    [
      "REDIS_SOCKET_TYPE",
      "REDIS_TYPE",
      "REDIS_URL",
      "REDIS_POOL_SIZE",
      "REDIS_AUTH",
      "REDIS_TLS",
      "REDIS_TLS_CLIENT_CERT",
      "REDIS_TLS_CLIENT_KEY",
      "REDIS_TLS_CACERT",
      "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
      "REDIS_PIPELINE_WINDOW",
      "REDIS_PIPELINE_LIMIT",
      "REDIS_PERSECOND",
      "REDIS_PERSECOND_URL",
      "REDIS_PERSECOND_TYPE",
      "REDIS_PERSECOND_SOCKET_TYPE",
      "REDIS_PERSECOND_POOL_SIZE",
      "REDIS_PERSECOND_AUTH",
      "REDIS_TIMEOUT",
      "MEMCACHE_HOST_PORT",
      "MEMCACHE_SRV",
      "BACKEND_TYPE",
      "CACHE_KEY_PREFIX",
      "EXPIRATION_JITTER_MAX_SECONDS",
      "LOCAL_CACHE_SIZE_IN_BYTES",
      "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
    ].map((name) => [name, "no Redis or memcached: the counts live on the ring's members"]),
  ),
  ...Object.fromEntries(
    ["RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY", "RUNTIME_IGNOREDOTFILES", "RUNTIME_WATCH_ROOT"].map((name) => [
      name,
      "policy files come from POLICY_PATH (a file or folder, watched), or over xDS",
    ]),
  ),
  ...Object.fromEntries(
    ["USE_STATSD", "STATSD_HOST", "STATSD_PORT", "USE_DOG_STATSD", "USE_DOG_STATSD_MOGRIFIERS", "EXTRA_TAGS", "STATS_FLUSH_INTERVAL", "DISABLE_STATS"].map(
      (name) => [name, "no statsd: Prometheus /metrics only"],
    ),
  ),
  PROMETHEUS_MAPPER_YAML: "the ratelimit_service_rate_limit_* names are those of envoyproxy/ratelimit's default mapper; another mapping is not applied",
  PROMETHEUS_PATH: "the path is /metrics",
  PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS: "ringlimit's own latency histograms are in seconds",
  GRPC_HOST: "HOST binds every listener",
  DEBUG_HOST: "no debug port",
  DEBUG_PORT: "no debug port",
  GRPC_UDS: "TCP only",
  GRPC_MAX_CONNECTION_AGE: "connections are kept until the caller or a drain closes them",
  GRPC_MAX_CONNECTION_AGE_GRACE: "connections are kept until the caller or a drain closes them",
  LOG_FORMAT: "logs are JSON lines",
  NEAR_LIMIT_RATIO: "near_limit is counted past 80 %, envoyproxy/ratelimit's default",
  LIMIT_RESPONSE_HEADERS_ENABLED: "RLS_RATELIMIT_HEADERS sends the IETF draft's RateLimit headers",
  MERGE_DOMAIN_CONFIG: "a domain is defined once; a duplicate is refused",
  CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: "XDS_CLIENT_BACKOFF_* pace every reconnection",
  XDS_CLIENT_BACKOFF_RANDOM_FACTOR: "the jitter is ±50 % of each wait",
  XDS_CLIENT_BACKOFF_JITTER: "always on",
  TRACING_ENABLED: "no tracing",
  TRACING_SERVICE_NAME: "no tracing",
  TRACING_SERVICE_NAMESPACE: "no tracing",
  TRACING_SERVICE_INSTANCE_ID: "no tracing",
  TRACING_EXPORTER_PROTOCOL: "no tracing",
  TRACING_SAMPLING_RATE: "no tracing",
  OTEL_EXPORTER_OTLP_ENDPOINT: "no tracing",
});

/** What configFrom derives from envoyproxy/ratelimit's settings, once every variable is read. */
interface Derivable extends RatelimitSettings {
  grpcPort: number | undefined;
  metricsPort: number | undefined;
  policyPath: string | undefined;
  port: number;
}

/**
 * Defaults that depend on envoyproxy/ratelimit's settings, and the checks that tie them together:
 * gRPC on 8081 when CONFIG_TYPE is set and GRPC_PORT is not (Envoy Gateway sets no port), /metrics
 * on PROMETHEUS_ADDR's port, the TLS files readable and matching.
 */
export function deriveRatelimitSettings(config: Derivable, explicitlySet: (field: "grpcPort" | "metricsPort") => boolean): void {
  if (config.configType !== undefined && !explicitlySet("grpcPort")) config.grpcPort = RATELIMIT_GRPC_PORT;
  if (config.configType === "GRPC_XDS_SOTW" && config.policyPath !== undefined) {
    throw new ConfigError("POLICY_PATH", "CONFIG_TYPE=GRPC_XDS_SOTW takes the policy over xDS: unset POLICY_PATH, or set CONFIG_TYPE=FILE");
  }
  if (config.configType === "GRPC_XDS_SOTW") {
    if (!/^[^\s/]+:\d{1,5}$/.test(config.xdsServerUrl)) throw new ConfigError("CONFIG_GRPC_XDS_SERVER_URL", `expected host:port, got "${config.xdsServerUrl}"`);
    for (const entry of config.xdsNodeMetadata) {
      if (!/^[^=]+=/.test(entry)) throw new ConfigError("CONFIG_GRPC_XDS_NODE_METADATA", `expected key=value entries, got "${entry}"`);
    }
    for (const entry of config.xdsClientHeaders) {
      if (!/^[0-9a-z_.-]+:/i.test(entry)) throw new ConfigError("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", `expected key:value entries, got "${entry}"`);
    }
    if (config.xdsServerUseTls) {
      checkTlsFiles("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", config.xdsClientTlsCert, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", config.xdsClientTlsKey);
      if (config.xdsServerTlsCaCert !== undefined) certificate("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", config.xdsServerTlsCaCert);
    }
    if (config.xdsBackoffMaxMs < config.xdsBackoffInitialMs) {
      throw new ConfigError("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "must be at least XDS_CLIENT_BACKOFF_INITIAL_INTERVAL");
    }
  }
  if (config.grpcServerUseTls) {
    if (config.grpcServerTlsCert === undefined) throw new ConfigError("GRPC_SERVER_TLS_CERT", "required when GRPC_SERVER_USE_TLS is true");
    checkTlsFiles("GRPC_SERVER_TLS_CERT", config.grpcServerTlsCert, "GRPC_SERVER_TLS_KEY", config.grpcServerTlsKey);
    const ca = grpcClientCa(config);
    if (ca !== undefined) certificate(config.grpcServerTlsCaCert !== undefined ? "GRPC_SERVER_TLS_CA_CERT" : "GRPC_CLIENT_TLS_CACERT", ca);
  }
  if (config.usePrometheus && !explicitlySet("metricsPort")) {
    const match = /^(?:[^\s]*):(\d{1,5})$/.exec(config.prometheusAddr.trim());
    if (match === null) throw new ConfigError("PROMETHEUS_ADDR", `expected [host]:port, got "${config.prometheusAddr}"`);
    config.metricsPort = int(0, 65535)(match[1]!, "PROMETHEUS_ADDR") as number;
    if (config.metricsPort === config.port && config.port !== 0) throw new ConfigError("PROMETHEUS_ADDR", `port ${config.port} is PORT's`);
  }
}

/** The CA of the callers' certificates on GRPC_PORT, under either of its names; undefined: no client certificates asked. */
export function grpcClientCa(config: Pick<RatelimitSettings, "grpcServerUseTls" | "grpcServerTlsCaCert" | "grpcClientTlsCaCert">): string | undefined {
  return config.grpcServerUseTls ? (config.grpcServerTlsCaCert ?? config.grpcClientTlsCaCert) : undefined;
}

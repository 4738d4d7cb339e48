import { parseArgs } from "node:util";
import { bool, certificate, checkTlsFiles, ConfigError, int, list, oneOf, str, type Parser } from "./config/parsers.js";
import { deriveRatelimitSettings, RATELIMIT_DEFAULTS, RATELIMIT_VARIABLES } from "./config/envoy-ratelimit.js";
import { problemOfPolicy } from "./policy/index.js";
import { clusterSecretWeakness } from "./peer/link/cluster-secret.js";
import { PROTOCOL_MIN, PROTOCOL_VERSION } from "./peer/wire/constants.js";
import { fileDescriptorLimit } from "./config/fd-limit.js";
import { CHARGE_ID_MEMORY_MS } from "./decision.js";
import { isAdvertiseUrl } from "./config/advertise-url.js";

/** WORKERS' bound: past this the state owner, one thread, is the ceiling (docs/architecture.md, Threads). */
export const MAX_WORKERS = 16;

/** Every setting and its default, in one place (docs/operations.md; `ringlimit --help` prints them). Units are in the names. */
export const DEFAULTS = Object.freeze({
  host: "0.0.0.0" as string,
  port: 8080 as number,
  apiKeys: [] as readonly string[],
  apiKeyHashes: [] as readonly string[],
  tlsCertFile: undefined as string | undefined,
  tlsKeyFile: undefined as string | undefined,
  nodeId: undefined as string | undefined, // default: this node's entry in PEERS / PEERS_DNS, else `${peerHost}:${peerPort}`
  peerHost: "0.0.0.0" as string,
  peerPort: undefined as number | undefined, // default: port + 1000
  peers: [] as readonly string[],
  peersDns: undefined as string | undefined,
  clusterSecret: undefined as string | undefined,
  peerTimeoutMs: 100 as number,
  peerTlsCertFile: undefined as string | undefined,
  peerTlsKeyFile: undefined as string | undefined,
  peerTlsCaFile: undefined as string | undefined,
  heartbeatIntervalMs: 200 as number,
  failureTimeoutMs: 1000 as number, // no frame from a peer for this long: it leaves this node's ring
  takeoverHoldMs: undefined as number | undefined, // default: FAILURE_TIMEOUT_MS
  maxClockSkewMs: 1000 as number, // a peer's clock further off than this is logged as a warning
  peerProtocolMax: PROTOCOL_VERSION as number, // the newest peer protocol this node speaks (docs/operations.md, Rolling upgrades)
  dnsIntervalMs: 5000 as number,
  dnsServer: undefined as string | undefined, // host:port of the DNS server for PEERS_DNS; default: the system resolver
  workers: 1 as number, // threads serving the HTTP door (WORKERS > 1: a state owner thread and that many workers; docs/architecture.md, Threads)
  drainTimeoutMs: 20000 as number, // SIGTERM: bound on handing states over and finishing requests
  stateDir: undefined as string | undefined, // set: states are snapshotted here and loaded at start (docs/durability.md)
  snapshotIntervalMs: 5000 as number, // with STATE_DIR: a SIGKILL loses at most this much of the counts held only here
  zone: undefined as string | undefined, // this member's failure domain (machine, rack, zone); unset: its own
  replicas: undefined as number | undefined, // copies of each state on the ring, the owner's included; default 2 with peers, 1 alone
  replicationDelayMs: 10 as number, // ms an owner gathers changed states before sending them to the replicas (0: every event-loop turn); bounds what an owner's SIGKILL loses
  failOpen: true as boolean,
  maxKeys: 5_000_000 as number,
  maxMemoryMb: undefined as number | undefined, // MiB for limit states (tables + blocked cache); default 30 % of V8's old space, shared as shard/table/memory-budget.ts says
  chargeIdMemoryMs: CHARGE_ID_MEMORY_MS as number, // ms a key's owner remembers a charge id and its answer (docs/api.md, Charge ids)
  metricsPort: undefined as number | undefined, // set: /metrics moves to this port
  advertiseUrl: undefined as string | undefined, // the URL clients reach this node at (GET /cluster); default: http(s)://host:port, see defaultAdvertiseUrl
  metricsToken: undefined as string | undefined, // set: /metrics requires `Authorization: Bearer <token>`
  metricsCacheMs: 1000 as number, // /metrics text is rendered at most once per this many ms (0: every scrape)
  metricsMaxNamespaces: 100 as number, // namespaces labelled in ringlimit_namespace_requests_total; later ones count as "other"
  logLevel: "info" as string,
  policyPath: undefined as string | undefined, // a YAML file or folder of them: RLS rules and /limit overrides (docs/policy.md)
  grpcPort: undefined as number | undefined, // set: Envoy's rate limit service (RLS v3) and grpc.health.v1 on this port (docs/envoy.md)
  grpcAuth: "api-key" as string, // "none": no API key asked on the gRPC port (a mesh with mTLS)
  grpcMaxConnections: undefined as number | undefined, // default: half the process's file descriptor limit, at most 4096 (the rest: HTTP and peer ports, files)
  grpcMaxConcurrentStreams: 100 as number,
  grpcPrefaceTimeoutMs: 5000 as number, // a connection (TLS handshake included) that has not sent the HTTP/2 preface and SETTINGS by then is closed
  grpcIdleTimeoutMs: 60_000 as number, // a connection without a stream for this long is sent GOAWAY and closed
  grpcDefaultDeadlineMs: 10_000 as number, // a call without grpc-timeout gets this deadline (DEADLINE_EXCEEDED past it)
  grpcMaxPendingBytes: (16 * 1024 * 1024) as number, // request bytes received and not yet decoded, all calls of the node together (RESOURCE_EXHAUSTED past it)
  shadowMode: false as boolean,
  rlsAllOrNothing: false as boolean,
  rlsCountBlocked: true as boolean,
  rlsRateLimitHeaders: false as boolean,
  grpcServerImpl: "ringlimit" as string, // the gRPC port's HTTP/2: ringlimit's own (src/rls/h2) or "node-http2"
  // envoyproxy/ratelimit's names, for a drop-in (docs/envoy-gateway.md)
  ...RATELIMIT_DEFAULTS,
});

/** Settings whose default configFrom derives from the others (see DEFAULTS): a Config always holds a number there. */
type Derived = "peerPort" | "replicas" | "takeoverHoldMs" | "grpcMaxConnections";

export type Config = {
  -readonly [K in keyof typeof DEFAULTS]: K extends Derived ? number : (typeof DEFAULTS)[K];
};

/**
 * API_KEYS / API_KEY_HASHES: comma-separated entries, each a key optionally scoped to
 * namespace prefixes with `@`: `svc_sk_A@checkout.,search.,svc_sk_B`. A part that does not
 * start a new key continues the prefix list of the scoped key before it.
 */
const keyList =
  (startsKey: RegExp, what: string): Parser =>
  (raw, name) => {
    const entries: string[] = [];
    const parts = list(raw, name) as string[];
    for (const [i, part] of parts.entries()) {
      if (startsKey.test(part)) entries.push(part);
      else if (entries.length > 0 && entries[entries.length - 1]!.includes("@")) entries[entries.length - 1] += "," + part;
      // Never echoed: a mistyped entry may be a secret.
      else throw new ConfigError(name, `entry ${i + 1} is not ${what}, nor a namespace prefix after a key@prefix entry`);
    }
    for (const entry of entries) {
      const at = entry.indexOf("@");
      const prefixes = at >= 0 ? entry.slice(at + 1).split(",") : [];
      if (prefixes.includes("")) {
        throw new ConfigError(name, "a key scope needs non-empty namespace prefixes: key@checkout.,search.");
      }
    }
    return entries;
  };
/**
 * Every environment variable ringlimit reads: its name, its parser and one line for
 * `--help`. The only list of them: flags, `--help`, the misspelling warning and the tests
 * derive from it, so a new setting is one entry here (plus its default in DEFAULTS).
 */
const VARIABLES: Record<keyof Config, [env: string, parse: Parser, help: string]> = {
  host: ["HOST", str, "address the HTTP listener binds"],
  port: ["PORT", int(0, 65535), "HTTP port for POST /limit, /health, /ready, /metrics (0: any free port)"],
  apiKeys: [
    "API_KEYS",
    keyList(/^svc_sk_/, "an API key (svc_sk_…)"),
    "comma-separated API keys (svc_sk_…), each optionally scoped to namespace prefixes: svc_sk_…@checkout.,search.; with neither this nor API_KEY_HASHES a key is generated and logged once",
  ],
  apiKeyHashes: [
    "API_KEY_HASHES",
    keyList(/^[0-9a-fA-F]{64}(@|$)/, "a SHA-256 in hex"),
    "comma-separated SHA-256 hex digests of API keys (keeps plaintext keys out of configuration), scoped like API_KEYS: <sha256>@checkout.",
  ],
  tlsCertFile: ["TLS_CERT_FILE", str, "PEM certificate (chain) for HTTPS and TLS on GRPC_PORT; set together with TLS_KEY_FILE (unset: plain HTTP)"],
  tlsKeyFile: ["TLS_KEY_FILE", str, "PEM private key for HTTPS"],
  nodeId: ["NODE_ID", str, "this node's ring name (unset: its entry in PEERS / PEERS_DNS, else PEER_HOST:PEER_PORT)"],
  peerHost: ["PEER_HOST", str, "address the peer listener binds"],
  peerPort: ["PEER_PORT", int(0, 65535), "port of the authenticated peer channel (unset: PORT + 1000)"],
  peers: ["PEERS", list, "comma-separated host:port of every member, this node included (static membership)"],
  peersDns: ["PEERS_DNS", str, "name:port whose A records are the members (e.g. a Kubernetes headless Service)"],
  clusterSecret: [
    "CLUSTER_SECRET",
    str,
    "shared secret of the peer channel, required with PEERS / PEERS_DNS: 64+ hex or 43+ other characters of 32 random bytes (npm run keygen prints one)",
  ],
  peerTimeoutMs: ["PEER_TIMEOUT_MS", int(1, 60_000), "ms to wait for an owner's answer before failing open"],
  peerTlsCertFile: ["PEER_TLS_CERT_FILE", str, "PEM certificate for TLS on the peer channel"],
  peerTlsKeyFile: ["PEER_TLS_KEY_FILE", str, "PEM private key for TLS on the peer channel"],
  peerTlsCaFile: ["PEER_TLS_CA_FILE", str, "PEM CA certificate(s) peers' certificates must chain to"],
  heartbeatIntervalMs: ["HEARTBEAT_INTERVAL_MS", int(10, 60_000), "ms between heartbeats to each peer"],
  failureTimeoutMs: ["FAILURE_TIMEOUT_MS", int(50, 600_000), "ms without a frame from a peer before it leaves this node's ring"],
  takeoverHoldMs: [
    "TAKEOVER_HOLD_MS",
    int(0, 600_000),
    "ms after a silent or slow peer leaves this node's ring during which its keys answer degraded here (it may still be counting them); 0: taken over at once (unset: FAILURE_TIMEOUT_MS)",
  ],
  maxClockSkewMs: ["MAX_CLOCK_SKEW_MS", int(1, 3_600_000), "warn when a peer's wall clock differs from this node's by more than this many ms"],
  peerProtocolMax: [
    "PEER_PROTOCOL_MAX",
    int(PROTOCOL_MIN, PROTOCOL_VERSION),
    `newest peer protocol version this node speaks, ${PROTOCOL_MIN} to ${PROTOCOL_VERSION} (docs/operations.md, Rolling upgrades)`,
  ],
  dnsIntervalMs: ["DNS_INTERVAL_MS", int(100, 3_600_000), "ms between PEERS_DNS lookups"],
  dnsServer: ["DNS_SERVER", str, "host:port of the DNS server for PEERS_DNS (unset: the system resolver)"],
  workers: [
    "WORKERS",
    int(1, MAX_WORKERS),
    `threads serving the HTTP door, 1 to ${MAX_WORKERS}; 1: one thread as before, more: that many workers around one state owner`,
  ],
  drainTimeoutMs: ["DRAIN_TIMEOUT_MS", int(0, 3_600_000), "on SIGTERM, ms to finish requests and hand states over"],
  stateDir: ["STATE_DIR", str, "directory for snapshots of the states, loaded at start (unset: no snapshots; docs/durability.md)"],
  snapshotIntervalMs: ["SNAPSHOT_INTERVAL_MS", int(100, 86_400_000), "ms between snapshots to STATE_DIR (what a SIGKILL of a lone node loses at most)"],
  zone: [
    "ZONE",
    str,
    "this member's failure domain (a machine, rack or zone; free text, up to 255 bytes): replicas go to members of other zones first (unset: a zone of its own)",
  ],
  replicas: ["REPLICAS", int(1, 16), "copies of each state on the ring, the owner's included (unset: 2 with PEERS / PEERS_DNS, 1 alone)"],
  replicationDelayMs: [
    "REPLICATION_DELAY_MS",
    int(0, 1_000),
    "ms an owner gathers changed states before sending them to their replicas, each once (0: every event-loop turn); an owner's SIGKILL loses at most the counts of this long plus a round trip",
  ],
  failOpen: ["FAIL_OPEN", bool, "answer 200 with degraded: true when no exact decision can be made (false: 500 or 503 instead)"],
  maxKeys: [
    "MAX_KEYS",
    int(1, 1_000_000_000),
    "rate-limit states kept in memory; beyond it the sampled state whose loss matters least (fewest counted requests, then nearest expiry) is evicted",
  ],
  maxMemoryMb: [
    "MAX_MEMORY_MB",
    int(16, 1_048_576),
    "MiB for rate-limit states (owned and replica tables, blocked cache); beyond it the state whose loss matters least is evicted (unset: 30 % of V8's old space, --max-old-space-size)",
  ],
  chargeIdMemoryMs: [
    "CHARGE_ID_MEMORY_MS",
    int(1_000, 86_400_000),
    "ms a key's owner remembers a charge_id and its answer: a retry within it is answered as the first and counts nothing (docs/api.md, Charge ids)",
  ],
  metricsPort: ["METRICS_PORT", int(0, 65535), "serve /metrics on this port instead of PORT (unset: on PORT)"],
  metricsToken: ["METRICS_TOKEN", str, "when set (16+ characters), /metrics requires Authorization: Bearer <token>"],
  metricsCacheMs: ["METRICS_CACHE_MS", int(0, 60_000), "render /metrics at most once per this many ms; scrapes in between get the same text (0: every scrape)"],
  metricsMaxNamespaces: [
    "METRICS_MAX_NAMESPACES",
    int(0, 10_000),
    'namespaces labelled in ringlimit_namespace_requests_total: the first this many seen; the rest count as "other" (0: all as "other")',
  ],
  advertiseUrl: ["ADVERTISE_URL", str, "the URL clients reach this node at, listed by GET /cluster (unset: http(s)://HOST:PORT)"],
  logLevel: ["LOG_LEVEL", oneOf(["fatal", "error", "warn", "info", "debug", "trace", "silent"]), "fatal, error, warn, info, debug, trace or silent"],
  policyPath: ["POLICY_PATH", str, "a YAML file or folder of them: RLS rules and POST /limit overrides, reloaded on change (docs/policy.md)"],
  grpcPort: [
    "GRPC_PORT",
    int(0, 65535),
    "port of Envoy's rate limit service (gRPC, RLS v3) and grpc.health.v1, with TLS when TLS_CERT_FILE is set (unset: off; docs/envoy.md)",
  ],
  grpcAuth: [
    "GRPC_AUTH",
    oneOf(["api-key", "none"]),
    "api-key: every RLS call needs authorization: Bearer <API key>; none: no key asked (only behind an mTLS mesh)",
  ],
  grpcMaxConnections: ["GRPC_MAX_CONNECTIONS", int(1, 1_000_000), "gRPC connections held at once (unset: half the open-file limit, at most 4096)"],
  grpcMaxConcurrentStreams: ["GRPC_MAX_CONCURRENT_STREAMS", int(1, 10_000), "calls open at once on one gRPC connection"],
  grpcPrefaceTimeoutMs: ["GRPC_PREFACE_TIMEOUT_MS", int(100, 600_000), "ms for a new gRPC connection's TLS handshake and HTTP/2 preface"],
  grpcIdleTimeoutMs: ["GRPC_IDLE_TIMEOUT_MS", int(100, 86_400_000), "ms a gRPC connection may stay without a call"],
  grpcDefaultDeadlineMs: ["GRPC_DEFAULT_DEADLINE_MS", int(1, 3_600_000), "deadline of a gRPC call without grpc-timeout"],
  grpcMaxPendingBytes: ["GRPC_MAX_PENDING_BYTES", int(65_536, 1 << 30), "bytes of unfinished gRPC requests, all calls together (RESOURCE_EXHAUSTED past it)"],
  shadowMode: [
    "SHADOW_MODE",
    bool,
    "every RLS answer is OK, and every POST /limit answer allowed; requests are still counted, and what would have been blocked shows in ringlimit_rls_shadow_mode_total and ringlimit_shadow_allowed_total",
  ],
  rlsAllOrNothing: [
    "RLS_ALL_OR_NOTHING",
    bool,
    "count an RLS request's descriptors only when every one passes (default: each counted on its own, as envoyproxy/ratelimit)",
  ],
  rlsCountBlocked: [
    "RLS_COUNT_BLOCKED",
    bool,
    "count every RLS hit, past the limit too (debt), as envoyproxy/ratelimit; false: a hit that does not fit is refused uncounted (rule field count_blocked overrides; RLS_ALL_OR_NOTHING implies false)",
  ],
  rlsRateLimitHeaders: ["RLS_RATELIMIT_HEADERS", bool, "add draft-10 RateLimit and RateLimit-Policy headers to RLS answers (response_headers_to_add)"],
  grpcServerImpl: [
    "GRPC_SERVER_IMPL",
    oneOf(["ringlimit", "node-http2"]),
    "the gRPC port's HTTP/2 server: ringlimit (built for unary gRPC) or node-http2 (Node's, to fall back on)",
  ],
  ...RATELIMIT_VARIABLES,
};

const HOST_PORT = /^[^\s:]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/;
const API_KEY = /^svc_sk_[A-Za-z0-9_-]{32,}$/;

/** `API_KEYS` → `--api-keys` */
export function flagOf(env: string): string {
  return "--" + env.toLowerCase().replace(/_/g, "-");
}

/**
 * Read configuration from the environment, overridden by `--kebab-case value` or
 * `--kebab-case=value` flags. Throws ConfigError naming the variable on the first bad value.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, argv: readonly string[] = []): Config {
  const line = parseCommandLine(argv);
  const unexpected = line.positionals[0] ?? (line.help ? "--help" : line.version ? "--version" : undefined);
  if (unexpected !== undefined) throw new ConfigError(unexpected, "unexpected argument");
  return configFrom(env, line.flags);
}

/** Configuration from the environment, overridden by already parsed `--kebab-case` flags. */
export function configFrom(env: NodeJS.ProcessEnv, flags: ReadonlyMap<string, string>): Config {
  const config = { ...DEFAULTS } as Config;
  for (const [field, [name, parse]] of Object.entries(VARIABLES) as [keyof Config, [string, Parser, string]][]) {
    const raw = flags.get(flagOf(name)) ?? env[name];
    if (raw === undefined) continue;
    (config as Record<string, unknown>)[field] = parse(raw, name);
  }
  if (config.peerPort === undefined) {
    if (config.port > 64535) throw new ConfigError("PEER_PORT", `default PORT + 1000 is out of range; set PEER_PORT`);
    config.peerPort = config.port === 0 ? 0 : config.port + 1000;
  }
  const keyOf = (entry: string) => (entry.includes("@") ? entry.slice(0, entry.indexOf("@")) : entry);
  for (const key of config.apiKeys.map(keyOf)) {
    if (!API_KEY.test(key)) throw new ConfigError("API_KEYS", "every key must be svc_sk_ followed by at least 32 characters of [A-Za-z0-9_-]");
  }
  for (const hash of config.apiKeyHashes.map(keyOf)) {
    if (!/^[0-9a-fA-F]{64}$/.test(hash)) throw new ConfigError("API_KEY_HASHES", "every entry must be 64 hex characters (SHA-256)");
  }
  checkTlsFiles("TLS_CERT_FILE", config.tlsCertFile, "TLS_KEY_FILE", config.tlsKeyFile);
  if (config.peerTlsCaFile !== undefined) certificate("PEER_TLS_CA_FILE", config.peerTlsCaFile);
  checkTlsFiles("PEER_TLS_CERT_FILE", config.peerTlsCertFile, "PEER_TLS_KEY_FILE", config.peerTlsKeyFile);
  for (const peer of config.peers) {
    if (!HOST_PORT.test(peer)) throw new ConfigError("PEERS", `expected comma-separated host:port entries, got "${peer}"`);
  }
  if (config.peersDns !== undefined && !HOST_PORT.test(config.peersDns)) {
    throw new ConfigError("PEERS_DNS", `expected name:port, got "${config.peersDns}"`);
  }
  if (config.advertiseUrl !== undefined && !isAdvertiseUrl(config.advertiseUrl)) {
    throw new ConfigError("ADVERTISE_URL", "expected an absolute http:// or https:// URL without credentials, query or fragment");
  }
  const clustered = config.peers.length > 0 || config.peersDns !== undefined;
  config.replicas ??= clustered ? 2 : 1;
  config.takeoverHoldMs ??= config.failureTimeoutMs;
  const fds = fileDescriptorLimit();
  config.grpcMaxConnections ??= fds === undefined ? 4096 : Math.max(16, Math.min(4096, Math.floor(fds / 2)));
  if (fds !== undefined && config.grpcMaxConnections > fds - 64)
    throw new ConfigError("GRPC_MAX_CONNECTIONS", `must leave room below the open-file limit (${fds}): at most ${fds - 64}`);
  if (clustered && config.clusterSecret === undefined) {
    throw new ConfigError("CLUSTER_SECRET", "required when PEERS or PEERS_DNS is set");
  }
  if (config.clusterSecret !== undefined) {
    const weakness = clusterSecretWeakness(config.clusterSecret);
    if (weakness !== undefined) throw new ConfigError("CLUSTER_SECRET", `${weakness}; npm run keygen prints a strong one`);
  }
  if (config.zone !== undefined && Buffer.byteLength(config.zone) > 255) throw new ConfigError("ZONE", "must be at most 255 bytes");
  if (config.metricsToken !== undefined && config.metricsToken.length < 16) {
    throw new ConfigError("METRICS_TOKEN", "must be at least 16 characters");
  }
  deriveRatelimitSettings(config, (field) => {
    const name = VARIABLES[field][0];
    return flags.has(flagOf(name)) || env[name] !== undefined;
  });
  const policyProblem = config.policyPath === undefined ? undefined : problemOfPolicy(config.policyPath); // start-up stops on a bad policy
  if (policyProblem !== undefined) throw new ConfigError("POLICY_PATH", policyProblem);
  if (config.failureTimeoutMs <= config.heartbeatIntervalMs) {
    throw new ConfigError("FAILURE_TIMEOUT_MS", "must be greater than HEARTBEAT_INTERVAL_MS");
  }
  return config;
}

/** What the command line says: `[command] [--help] [--version] [--kebab-case value | --kebab-case=value]…` */
export interface CommandLine {
  positionals: string[];
  help: boolean;
  version: boolean;
  /** `--kebab-case` → raw value, only known variables' flags */
  flags: Map<string, string>;
}

/** Parse argv with node:util parseArgs; throws ConfigError naming the offending argument. */
export function parseCommandLine(argv: readonly string[]): CommandLine {
  const options: Record<string, { type: "string" | "boolean"; short?: string }> = { help: { type: "boolean", short: "h" }, version: { type: "boolean" } };
  for (const [name] of Object.values(VARIABLES)) options[flagOf(name).slice(2)] = { type: "string" };
  // strict: false and tokens, so every mistake is reported here with the argument's own name.
  const { tokens } = parseArgs({ args: [...argv], options, strict: false, allowPositionals: true, tokens: true });
  const line: CommandLine = { positionals: [], help: false, version: false, flags: new Map() };
  for (const token of tokens) {
    if (token.kind === "positional") line.positionals.push(token.value);
    if (token.kind !== "option") continue;
    const option = options[token.name];
    if (option === undefined) {
      throw new ConfigError(token.rawName, "unknown flag (ringlimit --help lists them)");
    }
    if (option.type === "boolean") {
      if (token.value !== undefined) throw new ConfigError(token.rawName, "takes no value");
      line[token.name as "help" | "version"] = true;
      continue;
    }
    if (token.value === undefined || (!token.inlineValue && token.value.startsWith("--"))) throw new ConfigError(token.rawName, "flag needs a value");
    line.flags.set(token.rawName, token.value);
  }
  return line;
}

/** One known variable as `--help` shows it. */
export interface KnownVariable {
  name: string;
  flag: string;
  help: string;
  /** the default as text; "" when unset by default (the help line then says what unset means) */
  default: string;
}

export const KNOWN_VARIABLES: readonly KnownVariable[] = Object.freeze(
  (Object.entries(VARIABLES) as [keyof Config, [string, Parser, string]][]).map(([field, [name, , help]]) => {
    const value: unknown = DEFAULTS[field];
    const text = value === undefined ? "" : Array.isArray(value) ? value.join(",") : String(value);
    return Object.freeze({ name, flag: flagOf(name), help, default: text });
  }),
);

export const ENVIRONMENT_VARIABLES = Object.freeze(KNOWN_VARIABLES.map((v) => v.name));

export { ConfigError } from "./config/parsers.js";

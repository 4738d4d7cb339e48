import { readFileSync } from "node:fs";
import { isAdvertiseUrl } from "./shard/cluster/self-address.js";

/** Every setting and its default, in one place (DESIGN §5). Units are in the names. */
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
  dnsIntervalMs: 5000 as number,
  dnsServer: undefined as string | undefined, // host:port of the DNS server for PEERS_DNS; default: the system resolver
  drainTimeoutMs: 20000 as number, // SIGTERM: bound on handing states over and finishing requests
  failOpen: true as boolean,
  maxKeys: 5_000_000 as number,
  metricsPort: undefined as number | undefined, // set: /metrics moves to this port
  advertiseUrl: undefined as string | undefined, // the URL clients reach this node at (GET /cluster); default: http(s)://host:port, see defaultAdvertiseUrl
  logLevel: "info" as string,
});

export type Config = {
  -readonly [K in keyof typeof DEFAULTS]: (typeof DEFAULTS)[K];
};

type Parser = (raw: string, name: string) => unknown;

const int =
  (min: number, max: number): Parser =>
  (raw, name) => {
    if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `expected an integer from ${min} to ${max}, got "${raw}"`);
    const n = Number(raw);
    if (n < min || n > max) throw new ConfigError(name, `expected an integer from ${min} to ${max}, got ${n}`);
    return n;
  };
const str: Parser = (raw, name) => {
  if (raw.trim() === "") throw new ConfigError(name, "must not be empty");
  return raw.trim();
};
const list: Parser = (raw) =>
  raw
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
const bool: Parser = (raw, name) => {
  const v = raw.trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(v)) return true;
  if (["false", "0", "no", "off"].includes(v)) return false;
  throw new ConfigError(name, `expected true or false, got "${raw}"`);
};
const oneOf =
  (values: string[]): Parser =>
  (raw, name) => {
    if (!values.includes(raw.trim())) throw new ConfigError(name, `expected one of ${values.join(", ")}, got "${raw}"`);
    return raw.trim();
  };

const VARIABLES: Record<keyof Config, [env: string, parse: Parser]> = {
  host: ["HOST", str],
  port: ["PORT", int(0, 65535)],
  apiKeys: ["API_KEYS", list],
  apiKeyHashes: ["API_KEY_HASHES", list],
  tlsCertFile: ["TLS_CERT_FILE", str],
  tlsKeyFile: ["TLS_KEY_FILE", str],
  nodeId: ["NODE_ID", str],
  peerHost: ["PEER_HOST", str],
  peerPort: ["PEER_PORT", int(0, 65535)],
  peers: ["PEERS", list],
  peersDns: ["PEERS_DNS", str],
  clusterSecret: ["CLUSTER_SECRET", str],
  peerTimeoutMs: ["PEER_TIMEOUT_MS", int(1, 60_000)],
  peerTlsCertFile: ["PEER_TLS_CERT_FILE", str],
  peerTlsKeyFile: ["PEER_TLS_KEY_FILE", str],
  peerTlsCaFile: ["PEER_TLS_CA_FILE", str],
  heartbeatIntervalMs: ["HEARTBEAT_INTERVAL_MS", int(10, 60_000)],
  failureTimeoutMs: ["FAILURE_TIMEOUT_MS", int(50, 600_000)],
  dnsIntervalMs: ["DNS_INTERVAL_MS", int(100, 3_600_000)],
  dnsServer: ["DNS_SERVER", str],
  drainTimeoutMs: ["DRAIN_TIMEOUT_MS", int(0, 3_600_000)],
  failOpen: ["FAIL_OPEN", bool],
  maxKeys: ["MAX_KEYS", int(1, 1_000_000_000)],
  metricsPort: ["METRICS_PORT", int(0, 65535)],
  advertiseUrl: ["ADVERTISE_URL", str],
  logLevel: ["LOG_LEVEL", oneOf(["fatal", "error", "warn", "info", "debug", "trace", "silent"])],
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
  const flags = parseFlags(argv);
  const config = { ...DEFAULTS } as Config;
  for (const [field, [name, parse]] of Object.entries(VARIABLES) as [keyof Config, [string, Parser]][]) {
    const raw = flags.get(flagOf(name)) ?? env[name];
    if (raw === undefined) continue;
    (config as Record<string, unknown>)[field] = parse(raw, name);
  }
  if (config.peerPort === undefined) {
    if (config.port > 64535) throw new ConfigError("PEER_PORT", `default PORT + 1000 is out of range; set PEER_PORT`);
    config.peerPort = config.port === 0 ? 0 : config.port + 1000;
  }
  for (const key of config.apiKeys) {
    if (!API_KEY.test(key)) throw new ConfigError("API_KEYS", "every key must be svc_sk_ followed by at least 32 characters of [A-Za-z0-9_-]");
  }
  for (const hash of config.apiKeyHashes) {
    if (!/^[0-9a-fA-F]{64}$/.test(hash)) throw new ConfigError("API_KEY_HASHES", "every entry must be 64 hex characters (SHA-256)");
  }
  if ((config.tlsCertFile === undefined) !== (config.tlsKeyFile === undefined)) {
    throw new ConfigError(config.tlsCertFile === undefined ? "TLS_CERT_FILE" : "TLS_KEY_FILE", "TLS_CERT_FILE and TLS_KEY_FILE must be set together");
  }
  for (const [name, file] of [
    ["TLS_CERT_FILE", config.tlsCertFile],
    ["TLS_KEY_FILE", config.tlsKeyFile],
    ["PEER_TLS_CERT_FILE", config.peerTlsCertFile],
    ["PEER_TLS_KEY_FILE", config.peerTlsKeyFile],
    ["PEER_TLS_CA_FILE", config.peerTlsCaFile],
  ] as const) {
    if (file === undefined) continue;
    try {
      readFileSync(file);
    } catch {
      throw new ConfigError(name, `cannot read file ${file}`);
    }
  }
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
  if (clustered && config.clusterSecret === undefined) {
    throw new ConfigError("CLUSTER_SECRET", "required when PEERS or PEERS_DNS is set");
  }
  if (config.clusterSecret !== undefined && config.clusterSecret.length < 16) {
    throw new ConfigError("CLUSTER_SECRET", "must be at least 16 characters");
  }
  if (config.failureTimeoutMs <= config.heartbeatIntervalMs) {
    throw new ConfigError("FAILURE_TIMEOUT_MS", "must be greater than HEARTBEAT_INTERVAL_MS");
  }
  return config;
}

function parseFlags(argv: readonly string[]): Map<string, string> {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("--")) throw new ConfigError(arg, "unexpected argument");
    const eq = arg.indexOf("=");
    if (eq > 0) {
      flags.set(arg.slice(0, eq), arg.slice(eq + 1));
    } else {
      const value = argv[i + 1];
      if (value === undefined || value.startsWith("--")) throw new ConfigError(arg, "flag needs a value");
      flags.set(arg, value);
      i++;
    }
  }
  const known = new Set(Object.values(VARIABLES).map(([name]) => flagOf(name)));
  for (const flag of flags.keys()) if (!known.has(flag)) throw new ConfigError(flag, "unknown flag");
  return flags;
}

export const ENVIRONMENT_VARIABLES = Object.freeze(Object.values(VARIABLES).map(([name]) => name));

/** Thrown when start-up configuration is wrong; main prints `message` as one line. */
export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = "ConfigError";
  }
}

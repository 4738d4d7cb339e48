/**
 * loadConfig: defaults, environment, `--kebab-case` flags (both forms) overriding the
 * environment, and a ConfigError naming the variable for every bad value.
 */
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import t, { type Test } from "tap";
import { clusterSecretWeakness, EXAMPLE_CLUSTER_SECRETS, generateClusterSecret } from "../src/peer/link/cluster-secret.js";
import { DEFAULTS, ENVIRONMENT_VARIABLES, flagOf, KNOWN_VARIABLES, loadConfig, parseCommandLine } from "../src/config.js";
import { fileDescriptorLimit } from "../src/config/fd-limit.js";
import { ConfigError } from "../src/config.js";
import { selfSignedCert } from "./harness/certs.js";

const KEY_A = "svc_sk_" + "a".repeat(32);
const KEY_B = "svc_sk_" + "B-_9".repeat(10);
const HASH = "ab".repeat(32);
/** readable, but neither a certificate nor a key */
const READABLE = fileURLToPath(import.meta.url);
const SECRET = generateClusterSecret();
const CERT = await selfSignedCert(t, { commonName: "127.0.0.1" });
const OTHER = await selfSignedCert(t, { commonName: "127.0.0.1" });

function fails(t: Test, fn: () => unknown, variable: string, what: string): void {
  try {
    fn();
    t.fail(`${what}: expected a ConfigError naming ${variable}`);
  } catch (err) {
    t.ok(err instanceof ConfigError, `${what}: a ConfigError (${(err as Error).message})`);
    t.ok((err as Error).message.startsWith(variable + ":"), `${what}: names ${variable}: ${(err as Error).message}`);
    t.notMatch((err as Error).message, /\n/, `${what}: one line`);
  }
}

t.test("defaults", async (t) => {
  const c = loadConfig({}, []);
  t.equal(c.host, "0.0.0.0");
  t.equal(c.port, 8080);
  t.equal(c.peerPort, 9080, "PEER_PORT defaults to PORT + 1000");
  t.equal(c.peerHost, "0.0.0.0");
  t.same(c.apiKeys, []);
  t.same(c.apiKeyHashes, []);
  t.same(c.peers, []);
  t.equal(c.tlsCertFile, undefined);
  t.equal(c.tlsKeyFile, undefined);
  t.equal(c.clusterSecret, undefined);
  t.equal(c.peerTimeoutMs, 100);
  t.equal(c.failOpen, true, "FAIL_OPEN defaults to true");
  t.equal(c.maxKeys, 5_000_000);
  t.equal(c.metricsPort, undefined);
  t.equal(c.advertiseUrl, undefined);
  t.equal(c.logLevel, "info");
  t.equal(c.stateDir, undefined, "no snapshots unless STATE_DIR is set");
  t.equal(c.snapshotIntervalMs, 5000);
  t.equal(c.replicas, 1, "REPLICAS: 1 for a node alone");
  t.equal(loadConfig({ PEERS: "10.0.0.1:10000", CLUSTER_SECRET: SECRET }, []).replicas, 2, "REPLICAS: 2 with peers");
  t.equal(loadConfig({ PEERS: "10.0.0.1:10000", CLUSTER_SECRET: SECRET, REPLICAS: "3" }, []).replicas, 3);
  t.equal(c.takeoverHoldMs, c.failureTimeoutMs, "TAKEOVER_HOLD_MS: FAILURE_TIMEOUT_MS unless set");
  t.equal(loadConfig({ FAILURE_TIMEOUT_MS: "3000" }, []).takeoverHoldMs, 3000);
  t.equal(loadConfig({ TAKEOVER_HOLD_MS: "0" }, []).takeoverHoldMs, 0, "TAKEOVER_HOLD_MS=0 turns the hold off");
  t.equal(c.zone, undefined, "ZONE: unset, a zone of its own");
  t.equal(loadConfig({ ZONE: "europe-west1-b" }, []).zone, "europe-west1-b");
  t.equal(DEFAULTS.port, 8080);
  t.ok(Object.isFrozen(DEFAULTS));
  // loading does not change the defaults
  loadConfig({ PORT: "1234", API_KEYS: KEY_A }, []);
  t.equal(DEFAULTS.port, 8080);
  t.same(DEFAULTS.apiKeys, []);
});

t.test("environment", async (t) => {
  const c = loadConfig(
    {
      HOST: "127.0.0.1",
      PORT: "9000",
      API_KEYS: ` ${KEY_A} , ${KEY_B},,`,
      API_KEY_HASHES: HASH,
      PEER_HOST: "10.0.0.1",
      PEERS: "10.0.0.1:10000,10.0.0.2:10000,[::1]:10000",
      CLUSTER_SECRET: SECRET,
      PEER_TIMEOUT_MS: "250",
      FAIL_OPEN: "false",
      MAX_KEYS: "1000",
      METRICS_PORT: "9100",
      ADVERTISE_URL: "https://ringlimit.example",
      LOG_LEVEL: "debug",
      DRAIN_TIMEOUT_MS: "0",
      UNRELATED: "ignored",
    },
    [],
  );
  t.equal(c.host, "127.0.0.1");
  t.equal(c.port, 9000);
  t.equal(c.peerPort, 10000, "PORT + 1000");
  t.same(c.apiKeys, [KEY_A, KEY_B], "comma-separated, trimmed, empties dropped");
  t.same(c.apiKeyHashes, [HASH]);
  t.same(c.peers, ["10.0.0.1:10000", "10.0.0.2:10000", "[::1]:10000"]);
  t.equal(c.peerTimeoutMs, 250);
  t.equal(c.failOpen, false);
  t.equal(c.maxKeys, 1000);
  t.equal(c.metricsPort, 9100);
  t.equal(c.advertiseUrl, "https://ringlimit.example");
  t.equal(c.logLevel, "debug");
  t.equal(c.drainTimeoutMs, 0);
  t.equal(loadConfig({ PORT: "0" }, []).peerPort, 0, "PORT=0 (any free port) gives PEER_PORT=0");
  t.equal(loadConfig({ PORT: "8080", PEER_PORT: "7000" }, []).peerPort, 7000);
  t.equal(loadConfig({ PORT: " 8081 " }, []).port, 8081, "surrounding spaces are trimmed");
});

t.test("FAIL_OPEN: the accepted spellings", async (t) => {
  for (const v of ["true", "TRUE", "True", "1", "yes", "on", " true "]) t.equal(loadConfig({ FAIL_OPEN: v }, []).failOpen, true, v);
  for (const v of ["false", "FALSE", "0", "no", "off", "Off"]) t.equal(loadConfig({ FAIL_OPEN: v }, []).failOpen, false, v);
  for (const v of ["", "maybe", "2", "truee", "y", "n", "enabled"])
    fails(t, () => loadConfig({ FAIL_OPEN: v }, []), "FAIL_OPEN", `FAIL_OPEN=${JSON.stringify(v)}`);
  t.equal(loadConfig({ FAIL_OPEN: "true" }, ["--fail-open=false"]).failOpen, false, "flag overrides env");
  t.equal(loadConfig({ FAIL_OPEN: "false" }, ["--fail-open", "on"]).failOpen, true);
});

t.test("flags: --kebab-case, both forms, override the environment", async (t) => {
  t.equal(flagOf("API_KEY_HASHES"), "--api-key-hashes");
  t.equal(flagOf("PORT"), "--port");
  const env = { PORT: "1000", HOST: "127.0.0.1", LOG_LEVEL: "warn", API_KEYS: KEY_A };
  const c = loadConfig(env, ["--port", "2000", "--log-level=error", "--api-keys", `${KEY_B}`, "--max-keys=5", "--metrics-port", "0"]);
  t.equal(c.port, 2000, "--port value");
  t.equal(c.peerPort, 3000, "PEER_PORT follows the flag's PORT");
  t.equal(c.logLevel, "error", "--log-level=value");
  t.same(c.apiKeys, [KEY_B], "flag replaces env list");
  t.equal(c.maxKeys, 5);
  t.equal(c.metricsPort, 0);
  t.equal(c.host, "127.0.0.1", "env still applies where no flag is given");
  t.equal(loadConfig({}, ["--node-id=a=b"]).nodeId, "a=b", "split at the first =");
  t.same(loadConfig({}, ["--api-keys=" + KEY_A + "," + KEY_B]).apiKeys, [KEY_A, KEY_B], "--flag=a,b");
  t.same(loadConfig({}, ["--api-key-hashes=" + HASH]).apiKeyHashes, [HASH]);
  // every variable has its flag
  for (const name of ENVIRONMENT_VARIABLES) t.match(flagOf(name), /^--[a-z0-9-]+$/, name);
});

t.test("bad flags", async (t) => {
  fails(t, () => loadConfig({}, ["--no-such-thing", "1"]), "--no-such-thing", "unknown flag");
  fails(t, () => loadConfig({}, ["--no-such-thing=1"]), "--no-such-thing", "unknown flag with =");
  fails(t, () => loadConfig({}, ["--PORT", "1"]), "--PORT", "flags are lower-case");
  fails(t, () => loadConfig({}, ["--port"]), "--port", "flag without a value");
  fails(t, () => loadConfig({}, ["--port", "--host", "x"]), "--port", "flag followed by a flag");
  fails(t, () => loadConfig({}, ["serve"]), "serve", "positional argument");
  fails(t, () => loadConfig({}, ["-p", "1"]), "-p", "short flag");
  fails(t, () => loadConfig({ PORT: "80" }, ["--port", "abc"]), "PORT", "bad flag value names the variable");
  t.equal(loadConfig({ PORT: "abc" }, ["--port", "80"]).port, 80, "a flag replaces the env value before it is parsed");
});

t.test("the command line (node:util parseArgs): command, --help, --version, flags", async (t) => {
  t.same(parseCommandLine([]), { positionals: [], help: false, version: false, flags: new Map() });
  t.equal(parseCommandLine(["--help"]).help, true);
  t.equal(parseCommandLine(["-h"]).help, true);
  t.equal(parseCommandLine(["--version"]).version, true);
  t.same(parseCommandLine(["keygen"]).positionals, ["keygen"]);
  const line = parseCommandLine(["--port", "1", "--log-level=warn", "keygen"]);
  t.same(
    [...line.flags],
    [
      ["--port", "1"],
      ["--log-level", "warn"],
    ],
  );
  t.same(line.positionals, ["keygen"]);
  fails(t, () => parseCommandLine(["--help=yes"]), "--help", "a boolean flag takes no value");
  fails(t, () => parseCommandLine(["-x"]), "-x", "unknown short flag");
  fails(t, () => loadConfig({}, ["--help"]), "--help", "loadConfig itself takes only variables' flags");
});

t.test("KNOWN_VARIABLES: the one list --help and the misspelling warning use", async (t) => {
  t.same(
    KNOWN_VARIABLES.map((v) => v.name),
    ENVIRONMENT_VARIABLES,
  );
  t.equal(new Set(ENVIRONMENT_VARIABLES).size, ENVIRONMENT_VARIABLES.length, "no name twice");
  for (const v of KNOWN_VARIABLES) {
    t.match(v.name, /^[A-Z][A-Z0-9_]*$/, `${v.name}: upper snake case`);
    t.equal(v.flag, flagOf(v.name));
    t.ok(v.help.length > 10, `${v.name} has a help line`);
  }
  const byName = new Map(KNOWN_VARIABLES.map((v) => [v.name, v.default]));
  t.equal(byName.get("PORT"), String(DEFAULTS.port), "defaults come from DEFAULTS");
  t.equal(byName.get("LOG_LEVEL"), DEFAULTS.logLevel);
  t.equal(byName.get("PEER_PORT"), "", "unset by default: no default shown");
});

t.test("CLUSTER_SECRET: 32 random bytes' worth, no examples, errors do not echo it", async (t) => {
  // The rule must never refuse what keygen or the documented commands make.
  for (let i = 0; i < 2000; i++) {
    const bytes = randomBytes(32);
    for (const secret of [bytes.toString("base64url"), bytes.toString("base64"), bytes.toString("hex"), generateClusterSecret()]) {
      const weakness = clusterSecretWeakness(secret);
      if (weakness !== undefined) t.fail(`a random secret was refused: ${weakness}`);
    }
  }
  t.equal(clusterSecretWeakness("correct horse battery staple, and then some more words"), undefined, "a long passphrase of 55 characters passes");
  for (const example of EXAMPLE_CLUSTER_SECRETS) t.match(clusterSecretWeakness(example), /example value/, `${example} refused as an example`);
  t.match(clusterSecretWeakness("ab".repeat(16)), /64 characters/, "hex needs 64 characters");
  t.match(clusterSecretWeakness("Zx9!Qw7@Lp3#".repeat(4)), /repeated/);
  t.match(clusterSecretWeakness("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"), /sequences/);
  const weak = "kkmmkkmmkkmmpprrpprrpprrkkmmkkmmpprrpprrkkmmkm";
  t.match(clusterSecretWeakness(weak), /variety/);
  try {
    loadConfig({ PEERS: "a:1", CLUSTER_SECRET: weak }, []);
    t.fail("expected a ConfigError");
  } catch (err) {
    t.notOk((err as Error).message.includes(weak), "the weak secret is not echoed");
    t.match((err as Error).message, /^CLUSTER_SECRET: .*npm run keygen/);
  }
});

/** A bad value for every variable: adding a variable without a case here fails the test. */
const XDS = { CONFIG_TYPE: "GRPC_XDS_SOTW" };
const XDS_TLS = { ...XDS, CONFIG_GRPC_XDS_SERVER_USE_TLS: "true" };
const GRPC_TLS = { GRPC_SERVER_USE_TLS: "true", GRPC_SERVER_TLS_CERT: CERT.certFile, GRPC_SERVER_TLS_KEY: CERT.keyFile };
const PROMETHEUS = { USE_PROMETHEUS: "true" };
const BAD: Record<string, [value: string, extra?: Record<string, string>][]> = {
  HOST: [[""], ["   "]],
  PORT: [["abc"], ["-1"], ["65536"], ["80.5"], ["1e3"], [""], ["0x50"]],
  API_KEYS: [["nope"], ["svc_sk_short"], [`${KEY_A},svc_sk_bad key with spaces xxxxxxxxxxxxxxxxxxxxx`], ["sk_" + "a".repeat(40)]],
  API_KEY_HASHES: [["abc"], ["g".repeat(64)], [HASH + "0"], [`${HASH},short`]],
  TLS_CERT_FILE: [
    [""],
    ["/nonexistent/cert.pem", { TLS_KEY_FILE: CERT.keyFile }],
    [READABLE, { TLS_KEY_FILE: CERT.keyFile }],
    [CERT.keyFile, { TLS_KEY_FILE: CERT.keyFile }],
  ],
  TLS_KEY_FILE: [
    [""],
    ["/nonexistent/key.pem", { TLS_CERT_FILE: CERT.certFile }],
    [READABLE, { TLS_CERT_FILE: CERT.certFile }],
    [CERT.certFile, { TLS_CERT_FILE: CERT.certFile }],
    [OTHER.keyFile, { TLS_CERT_FILE: CERT.certFile }],
  ],
  NODE_ID: [[""]],
  PEER_HOST: [[""]],
  PEER_PORT: [["x"], ["70000"]],
  PEERS: [
    ["nohost", { CLUSTER_SECRET: SECRET }],
    ["a:b", { CLUSTER_SECRET: SECRET }],
    ["a:1:2", { CLUSTER_SECRET: SECRET }],
  ],
  PEERS_DNS: [[""], ["name-without-port", { CLUSTER_SECRET: SECRET }]],
  CLUSTER_SECRET: [
    [""],
    ["short", { PEERS: "a:1" }],
    ["s".repeat(15)],
    ...EXAMPLE_CLUSTER_SECRETS.map((example) => [example] as [string]),
    ["0123456789abcdef0123456789abcdef0123456789abcdef"], // 48 hex: 24 bytes
    ["a".repeat(64)],
    ["0123456789abcdef".repeat(4)], // 64 hex, a repeated 16
    ["Zx9!Qw7@Lp3#".repeat(4)], // 48 characters, a repeated 12
    ["abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"], // a sequence
    ["kkmmkkmmkkmmpprrpprrpprrkkmmkkmmpprrpprrkkmmkm"], // four letters: too little variety
  ],
  PEER_TIMEOUT_MS: [["0"], ["fast"], ["60001"]],
  PEER_TLS_CERT_FILE: [[""], ["/nonexistent/peer.pem"], [READABLE, { PEER_TLS_KEY_FILE: CERT.keyFile }]],
  PEER_TLS_KEY_FILE: [
    [""],
    ["/nonexistent/peer.key"],
    [READABLE, { PEER_TLS_CERT_FILE: CERT.certFile }],
    [OTHER.keyFile, { PEER_TLS_CERT_FILE: CERT.certFile }],
  ],
  PEER_TLS_CA_FILE: [[""], ["/nonexistent/ca.pem"], [READABLE], [CERT.keyFile]],
  HEARTBEAT_INTERVAL_MS: [["5"], ["x"]],
  FAILURE_TIMEOUT_MS: [["10"], ["100", { HEARTBEAT_INTERVAL_MS: "200" }]],
  TAKEOVER_HOLD_MS: [["-1"], ["600001"], ["soon"]],
  MAX_CLOCK_SKEW_MS: [["0"], ["1s"], ["3600001"]],
  PEER_PROTOCOL_MAX: [["10"], ["99"], ["12.5"]],
  DNS_INTERVAL_MS: [["1"], ["soon"]],
  DNS_SERVER: [[""]],
  DRAIN_TIMEOUT_MS: [["-1"], ["forever"]],
  WORKERS: [["0"], ["17"], ["two"], ["1.5"]],
  STATE_DIR: [[""], ["  "]],
  SNAPSHOT_INTERVAL_MS: [["0"], ["99"], ["5s"]],
  REPLICAS: [["0"], ["17"], ["two"]],
  REPLICATION_DELAY_MS: [["-1"], ["1001"], ["ten"]],
  ZONE: [[""], ["z".repeat(256)], ["é".repeat(128)]],
  FAIL_OPEN: [["maybe"]],
  MAX_KEYS: [["0"], ["-5"], ["1000000001"], ["many"]],
  METRICS_MAX_NAMESPACES: [["-1"], ["1.5"], ["lots"], ["10001"]],
  CHARGE_ID_MEMORY_MS: [["999"], ["86400001"], ["1.5"]],
  METRICS_PORT: [["x"], ["65536"]],
  ADVERTISE_URL: [[""], ["10.0.0.1:8080"], ["ftp://x"], ["http://user:pw@x"], ["http://x/?q=1"]],
  METRICS_TOKEN: [[""], ["short-token"]],
  METRICS_CACHE_MS: [["-1"], ["60001"], ["1s"]],
  MAX_MEMORY_MB: [["15"], ["lots"], ["1048577"]],
  LOG_LEVEL: [["loud"], ["INFO"], [""]],
  GRPC_PORT: [["x"], ["65536"], [""]],
  GRPC_AUTH: [["off"], ["None"], [""]],
  GRPC_MAX_CONNECTIONS: [["0"], ["-1"], ["many"], ["1000001"]],
  GRPC_MAX_CONCURRENT_STREAMS: [["0"], ["10001"], ["1.5"]],
  GRPC_PREFACE_TIMEOUT_MS: [["99"], ["x"]],
  GRPC_IDLE_TIMEOUT_MS: [["99"], [""]],
  GRPC_DEFAULT_DEADLINE_MS: [["0"], ["3600001"]],
  GRPC_MAX_PENDING_BYTES: [["65535"], ["1073741825"]],
  SHADOW_MODE: [["maybe"], [""]],
  QUOTA_MODE: [["maybe"], [""]],
  RESPONSE_DYNAMIC_METADATA: [["maybe"], [""]],
  RLS_ALL_OR_NOTHING: [["2"], [""]],
  RLS_COUNT_BLOCKED: [["2"], [""]],
  RLS_RATELIMIT_HEADERS: [["draft-10"], [""]],
  GRPC_SERVER_IMPL: [["nghttp2"], ["Ringlimit"], [""]],
  POLICY_PATH: [[""], ["/nonexistent/policy.yaml"], [READABLE]],
  // envoyproxy/ratelimit's names (config/envoy-ratelimit.ts)
  CONFIG_TYPE: [["REDIS"], [""]],
  FORCE_START_WITHOUT_INITIAL_CONFIG: [["maybe"]],
  HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: [["maybe"]],
  CONFIG_GRPC_XDS_SERVER_URL: [[""], ["http://x:1", XDS], ["no-port", XDS]],
  CONFIG_GRPC_XDS_NODE_ID: [[""]],
  CONFIG_GRPC_XDS_NODE_METADATA: [["no-value", XDS]],
  CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: [["no-value", XDS]],
  CONFIG_GRPC_XDS_SERVER_USE_TLS: [["maybe"]],
  CONFIG_GRPC_XDS_CLIENT_TLS_CERT: [[""], ["/nonexistent/cert.pem", { ...XDS_TLS, CONFIG_GRPC_XDS_CLIENT_TLS_KEY: CERT.keyFile }]],
  CONFIG_GRPC_XDS_CLIENT_TLS_KEY: [[""], [OTHER.keyFile, { ...XDS_TLS, CONFIG_GRPC_XDS_CLIENT_TLS_CERT: CERT.certFile }]],
  CONFIG_GRPC_XDS_SERVER_TLS_CACERT: [[""], [CERT.keyFile, XDS_TLS]],
  CONFIG_GRPC_XDS_SERVER_TLS_SAN: [[""]],
  XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: [["soon"], ["5ms"], ["2h"]],
  XDS_CLIENT_BACKOFF_MAX_INTERVAL: [["soon"], ["1s", { ...XDS, XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: "10s" }]],
  XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: [["10"], ["big"]],
  GRPC_SERVER_USE_TLS: [["maybe"]],
  GRPC_SERVER_TLS_CERT: [[""], ["/nonexistent/cert.pem", { GRPC_SERVER_USE_TLS: "true", GRPC_SERVER_TLS_KEY: CERT.keyFile }]],
  GRPC_SERVER_TLS_KEY: [[""], [OTHER.keyFile, { GRPC_SERVER_USE_TLS: "true", GRPC_SERVER_TLS_CERT: CERT.certFile }]],
  GRPC_SERVER_TLS_CA_CERT: [[""], [CERT.keyFile, GRPC_TLS]],
  GRPC_CLIENT_TLS_CACERT: [[""], [CERT.keyFile, GRPC_TLS]],
  GRPC_CLIENT_TLS_SAN: [[""]],
  USE_PROMETHEUS: [["maybe"]],
  PROMETHEUS_ADDR: [
    ["19001", PROMETHEUS],
    [":x", PROMETHEUS],
    [":8080", { ...PROMETHEUS, PORT: "8080" }],
  ],
};

t.test("every bad value names its variable, from env and from the flag", async (t) => {
  const missing = ENVIRONMENT_VARIABLES.filter((name) => BAD[name] === undefined);
  t.same(missing, [], "a bad-value case exists for every variable");
  for (const name of ENVIRONMENT_VARIABLES) {
    for (const [value, extra] of BAD[name] ?? []) {
      fails(t, () => loadConfig({ ...extra, [name]: value }, []), name, `${name}=${JSON.stringify(value)}`);
      fails(t, () => loadConfig({ ...extra }, [`${flagOf(name)}=${value}`]), name, `${flagOf(name)}=${JSON.stringify(value)}`);
    }
  }
  fails(t, () => loadConfig({ PORT: "64536" }, []), "PEER_PORT", "PORT + 1000 out of range");
  fails(t, () => loadConfig({ TLS_CERT_FILE: CERT.certFile }, []), "TLS_KEY_FILE", "TLS_CERT_FILE alone names the missing TLS_KEY_FILE");
  fails(t, () => loadConfig({ TLS_KEY_FILE: CERT.keyFile }, []), "TLS_CERT_FILE", "TLS_KEY_FILE alone names the missing TLS_CERT_FILE");
  fails(t, () => loadConfig({ PEER_TLS_CERT_FILE: CERT.certFile }, []), "PEER_TLS_KEY_FILE", "PEER_TLS_CERT_FILE alone");
  fails(t, () => loadConfig({ PEER_TLS_KEY_FILE: CERT.keyFile }, []), "PEER_TLS_CERT_FILE", "PEER_TLS_KEY_FILE alone");
  const tls = loadConfig(
    { TLS_CERT_FILE: CERT.certFile, TLS_KEY_FILE: CERT.keyFile, PEER_TLS_CERT_FILE: OTHER.certFile, PEER_TLS_KEY_FILE: OTHER.keyFile },
    [],
  );
  t.equal(tls.tlsCertFile, CERT.certFile, "a certificate and its key: accepted");
  t.equal(tls.peerTlsKeyFile, OTHER.keyFile);
  t.equal(loadConfig({ PORT: "64536", PEER_PORT: "1" }, []).port, 64536, "fine with PEER_PORT set");
  fails(t, () => loadConfig({ PEERS: "10.0.0.1:10000" }, []), "CLUSTER_SECRET", "PEERS without CLUSTER_SECRET");
  fails(t, () => loadConfig({ PEERS_DNS: "ringlimit:10000" }, []), "CLUSTER_SECRET", "PEERS_DNS without CLUSTER_SECRET");
});

t.test("errors about secrets do not print them", async (t) => {
  for (const [env, secret] of [
    [{ API_KEYS: "svc_sk_T0pS3cr3tButTooShort" }, "T0pS3cr3t"],
    [{ API_KEYS: `${KEY_A},svc_sk_T0pS3cr3t!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!` }, "T0pS3cr3t"],
    [{ CLUSTER_SECRET: "Sh0rtS3cr3t" }, "Sh0rtS3cr3t"],
    [{ API_KEY_HASHES: "5ec7e7" + "0".repeat(57) }, "5ec7e7"],
  ] as const) {
    try {
      loadConfig(env, []);
      t.fail("expected an error");
    } catch (err) {
      t.notOk((err as Error).message.includes(secret), `not echoed: ${(err as Error).message}`);
    }
  }
});

t.test("POLICY_PATH: a policy that does not load stops start-up, naming the file and the problem; SHADOW_MODE is a boolean", async (t) => {
  const fixtures = fileURLToPath(new URL("../../test/policy/fixtures/", import.meta.url));
  t.equal(loadConfig({ POLICY_PATH: fixtures + "good" }).policyPath, fixtures + "good");
  t.equal(loadConfig({}).policyPath, undefined, "unset by default");
  fails(t, () => loadConfig({ POLICY_PATH: fixtures + "no-such-folder" }), "POLICY_PATH", "missing");
  try {
    loadConfig({ POLICY_PATH: fixtures + "broken/bad-unit.yaml" });
  } catch (err) {
    t.equal(
      (err as Error).message,
      `POLICY_PATH: ${fixtures}broken/bad-unit.yaml: line 5: invalid rate limit unit 'foo' (second, minute, hour, day, week, month, year; or duration: <seconds>)`,
    );
  }
  t.equal(loadConfig({}).shadowMode, false);
  t.equal(loadConfig({ SHADOW_MODE: "true" }).shadowMode, true);
  fails(t, () => loadConfig({ SHADOW_MODE: "maybe" }), "SHADOW_MODE", "not a boolean");
});

t.test("GRPC_MAX_CONNECTIONS: half the file descriptor limit by default, never up to the limit", async (t) => {
  const fds = fileDescriptorLimit();
  const config = loadConfig({}, []);
  if (fds === undefined) {
    t.equal(config.grpcMaxConnections, 4096);
    return;
  }
  t.equal(config.grpcMaxConnections, Math.max(16, Math.min(4096, Math.floor(fds / 2))));
  t.throws(() => loadConfig({ GRPC_MAX_CONNECTIONS: String(fds) }, []), /GRPC_MAX_CONNECTIONS: must leave room below the open-file limit/);
  t.equal(loadConfig({ GRPC_MAX_CONNECTIONS: String(fds - 64) }, []).grpcMaxConnections, fds - 64);
});

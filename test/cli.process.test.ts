/**
 * The command line, on the real entry point (`node dist/src/main.js`) where it matters:
 * --help and --version, keygen's cluster secret, the start-up warning about variables that
 * look like ours, and start-up errors that name the variable: a bad certificate file, a
 * weak secret, a port that is taken (by any process, another ringlimit node included).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t, { type Test } from "tap";
import { lookalikeVariables, usage } from "../src/cli.js";
import { clusterSecretWeakness, EXAMPLE_CLUSTER_SECRETS, generateClusterSecret } from "../src/peer/link/cluster-secret.js";
import { PROTOCOL_MIN, PROTOCOL_VERSION } from "../src/peer/wire/constants.js";
import { ENVIRONMENT_VARIABLES, KNOWN_VARIABLES } from "../src/config.js";
import { selfSignedCert } from "./harness/certs.js";
import { closeAgents, TEST_KEY } from "./harness/http-client.js";
import { spawnNode } from "./harness/node-process.js";
import { runMain } from "./harness/run-main.js";
import { freePort } from "./harness/ports.js";
import { eventually } from "./harness/wait.js";

t.teardown(closeAgents);
// The subtests are independent (each takes its own ports and files): they run side by side.
// Each waits seconds for node to start on a loaded machine, mostly idle; one after another
// they came to 105 s at load 35, next to tap's 120 s bound for a file.
t.jobs = 8;

const PACKAGE = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
const BASE = { HOST: "127.0.0.1", API_KEYS: TEST_KEY, LOG_LEVEL: "info" };

/** A plain TCP listener holding a port, as any other program would. */
async function holdPort(t: Test): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as net.AddressInfo).port;
}

function oneLine(t: Test, stderr: string, what: string): string {
  const lines = stderr.split("\n").filter((l) => l !== "");
  t.equal(lines.length, 1, `${what}: one line on stderr: ${JSON.stringify(stderr)}`);
  t.notMatch(stderr, /\bat .*\.js|node_modules/, `${what}: no stack trace`);
  return lines[0] ?? "";
}

t.test("--help: usage, every command and every variable with its default; exit 0", async (t) => {
  const flags = ["--help", "-h"] as const;
  // Every run of this file is started at once and judged in order: on a loaded machine each
  // start-up takes seconds, and they need not wait for each other.
  const [runs, withPort] = await Promise.all([Promise.all(flags.map((flag) => runMain([flag], {}))), runMain(["--port", "1", "--help"], {})]);
  for (const [i, flag] of flags.entries()) {
    const run = runs[i]!;
    t.equal(run.code, 0, `${flag}: exit 0`);
    t.equal(run.stderr, "");
    t.match(run.stdout, /^Usage:$/m);
    t.match(run.stdout, /ringlimit keygen /);
    for (const v of KNOWN_VARIABLES) {
      const line = run.stdout.split("\n").find((l) => l.trimStart().startsWith(v.name + " "));
      t.ok(line, `${v.name} is listed`);
      if (v.default !== "") t.ok(line?.includes(`[default: ${v.default}]`), `${v.name} shows its default ${v.default}`);
    }
  }
  t.equal(
    usage()
      .split("\n")
      .filter((l) => /^ {2}[A-Z][A-Z0-9_]+ {2}/.test(l)).length,
    ENVIRONMENT_VARIABLES.length,
    "one line per variable, no more",
  );
  t.equal(withPort.code, 0, "--help wins over other flags and starts nothing");
});

t.test("--version prints package.json's version and the commit it was built from", async (t) => {
  const run = await runMain(["--version"], {});
  t.equal(run.code, 0);
  const m = /^(\S+) \(commit (\S+), peer protocol (\d+)\.\.(\d+)\)\n$/.exec(run.stdout);
  t.ok(m, `the line's form: ${JSON.stringify(run.stdout)}`);
  t.equal(m?.[1], PACKAGE.version);
  const built = JSON.parse(readFileSync(fileURLToPath(new URL("../src/build-info.json", import.meta.url)), "utf8")) as { commit: string };
  t.equal(m?.[2], built.commit, "the commit the build wrote");
  // Where git runs, the build ran in this checkout (npm run build), so the commit is HEAD's,
  // "-dirty" when tracked files differ. The Node 24 lane runs the same build in a Debian 13 root
  // without git (.ci/debian13): there only the line and the build's file are compared.
  const head = spawnSync("git", ["rev-parse", "--short=12", "HEAD"], { encoding: "utf8" });
  if (head.error === undefined && head.status === 0) t.match(m?.[2] ?? "", new RegExp(`^${head.stdout.trim()}(-dirty)?$`), "HEAD's commit");
  else t.comment(`no git here (${head.error?.message ?? `exit ${head.status}`}): HEAD not compared`);
  t.same([Number(m?.[3]), Number(m?.[4])], [PROTOCOL_MIN, PROTOCOL_VERSION], "and the peer protocol versions it speaks");
});

t.test("--version outside a checkout: the commit is unknown, never a stale or a made-up one", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-build-info-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const script = fileURLToPath(new URL("../../scripts/write-build-info.mjs", import.meta.url));
  const env: NodeJS.ProcessEnv = { ...process.env, GIT_CEILING_DIRECTORIES: dir };
  delete env.GIT_COMMIT;
  const run = spawnSync(process.execPath, [script], { cwd: dir, env, encoding: "utf8" });
  t.equal(run.status, 0, run.stderr);
  t.same(JSON.parse(readFileSync(path.join(dir, "dist/src/build-info.json"), "utf8")), { commit: "unknown" });
  const given = spawnSync(process.execPath, [script], { cwd: dir, env: { ...env, GIT_COMMIT: "0123456789ab" }, encoding: "utf8" });
  t.equal(given.status, 0, given.stderr);
  t.same(
    JSON.parse(readFileSync(path.join(dir, "dist/src/build-info.json"), "utf8")),
    { commit: "0123456789ab" },
    "GIT_COMMIT (an image's build argument) wins",
  );
});

t.test("unknown command or flag: one line naming it, exit 2", async (t) => {
  const cases = [
    [["serve"], "serve"],
    [["keygen", "extra"], "extra"],
    [["--prot", "8080"], "--prot"],
    [["--version=2"], "--version"],
  ] as const;
  const runs = await Promise.all(cases.map(([args]) => runMain([...args], BASE)));
  for (const [i, [args, name]] of cases.entries()) {
    const run = runs[i]!;
    t.equal(run.code, 2, `${args.join(" ")}: exit 2`);
    t.match(oneLine(t, run.stderr, args.join(" ")), name);
  }
});

t.test("keygen prints a CLUSTER_SECRET that the rule accepts and a real cluster runs with", async (t) => {
  const [run, again] = await Promise.all([runMain(["keygen"], {}), runMain(["keygen"], {})]);
  t.equal(run.code, 0);
  const secret = /^CLUSTER_SECRET: (\S+)$/m.exec(run.stdout)?.[1];
  t.ok(secret, `a cluster secret in ${JSON.stringify(run.stdout)}`);
  t.equal(secret!.length, 43, "32 bytes, base64url");
  t.equal(clusterSecretWeakness(secret!), undefined);
  t.not(/^CLUSTER_SECRET: (\S+)$/m.exec(again.stdout)?.[1], secret, "a new one each run");
  const peerPort = await freePort();
  const node = await spawnNode({ PEER_HOST: "127.0.0.1", PEER_PORT: String(peerPort), PEERS: `127.0.0.1:${peerPort}`, CLUSTER_SECRET: secret! });
  t.teardown(() => node.kill());
  t.pass("a node with the generated secret became ready");
  t.notOk(node.output().includes(secret!), "the secret is not logged");
});

t.test("a weak or example CLUSTER_SECRET stops start-up with one line, not echoing it", async (t) => {
  const peerPort = await freePort();
  const secrets = [EXAMPLE_CLUSTER_SECRETS[0]!, "a".repeat(64), "0123456789abcdef".repeat(3), "s".repeat(16)];
  const runs = await Promise.all(
    secrets.map((secret) => runMain([], { ...BASE, PORT: "0", PEER_PORT: String(peerPort), PEERS: `127.0.0.1:${peerPort}`, CLUSTER_SECRET: secret })),
  );
  for (const [i, secret] of secrets.entries()) {
    const run = runs[i]!;
    t.equal(run.code, 2, "exit 2");
    const line = oneLine(t, run.stderr, secret.slice(0, 12));
    t.match(line, /CLUSTER_SECRET/);
    t.notOk(line.includes(secret), "the secret is not echoed");
    t.equal(run.stdout, "", "nothing started");
  }
});

t.test("certificate files: a wrong file names its variable", async (t) => {
  const cert = await selfSignedCert(t, { commonName: "127.0.0.1" });
  const other = await selfSignedCert(t, { commonName: "127.0.0.1" });
  const notPem = new URL(import.meta.url).pathname;
  const cases = [
    [{ TLS_CERT_FILE: notPem, TLS_KEY_FILE: cert.keyFile }, "TLS_CERT_FILE"],
    [{ TLS_CERT_FILE: cert.keyFile, TLS_KEY_FILE: cert.keyFile }, "TLS_CERT_FILE"],
    [{ TLS_CERT_FILE: cert.certFile, TLS_KEY_FILE: notPem }, "TLS_KEY_FILE"],
    [{ TLS_CERT_FILE: cert.certFile, TLS_KEY_FILE: other.keyFile }, "TLS_KEY_FILE"],
    [{ PEER_TLS_CA_FILE: notPem }, "PEER_TLS_CA_FILE"],
  ] as const;
  const runs = await Promise.all(cases.map(([env]) => runMain([], { ...BASE, PORT: "0", ...env })));
  for (const [i, [, name]] of cases.entries()) {
    const run = runs[i]!;
    t.equal(run.code, 2, `${name}: exit 2`);
    t.match(oneLine(t, run.stderr, name), new RegExp(`^ringlimit: invalid configuration: ${name}: `), `names ${name}`);
  }
});

t.test("a port that is taken: which variable, which port, why; exit 1, one line", async (t) => {
  const taken = await holdPort(t);
  // Another ringlimit node on the same port: uWS's default SO_REUSEPORT would let both
  // bind and split the connections; the second must fail instead.
  const [run, first, metrics, peer] = await Promise.all([
    runMain([], { ...BASE, PORT: String(taken) }),
    spawnNode({}),
    runMain([], { ...BASE, PORT: "0", METRICS_PORT: String(taken) }),
    runMain([], {
      ...BASE,
      PORT: "0",
      PEER_HOST: "127.0.0.1",
      PEER_PORT: String(taken),
      PEERS: `127.0.0.1:${taken}`,
      CLUSTER_SECRET: generateClusterSecret(),
    }),
  ]);
  t.teardown(() => first.kill());
  t.equal(run.code, 1);
  const line = oneLine(t, run.stderr, "PORT taken");
  t.match(line, `PORT: cannot listen on 127.0.0.1:${taken}`);
  t.match(line, /already in use.*EADDRINUSE/);

  const second = await runMain([], { ...BASE, PORT: String(first.port), PEER_PORT: String(await freePort()) });
  t.equal(second.code, 1, "a second node on a ringlimit node's port does not start");
  t.match(oneLine(t, second.stderr, "PORT of a node"), `PORT: cannot listen on 127.0.0.1:${first.port}`);

  t.equal(metrics.code, 1);
  t.match(oneLine(t, metrics.stderr, "METRICS_PORT taken"), `METRICS_PORT: cannot listen on 127.0.0.1:${taken}`);

  t.equal(peer.code, 1);
  t.match(oneLine(t, peer.stderr, "PEER_PORT taken"), new RegExp(`PEER_PORT: cannot listen on 127\\.0\\.0\\.1:${taken}: .*EADDRINUSE`));
});

t.test("lookalike variables: warned about, by name only", async (t) => {
  const env = {
    API_KEY: "svc_sk_not-read",
    RINGLIMIT_PORT: "8080",
    RINGLIMIT_LOG_LEVEL: "debug",
    CLUSTER_SECRTE: "x",
    port: "1",
    DNS_SERVERS: "127.0.0.1:53",
    // a unit or a synonym away (issue #41): too many letters apart for the edit distance alone
    PEER_TIMEOUT: "500",
    FAILURE_TIMEOUT: "3000",
    DRAIN_TIMEOUT_SECONDS: "30",
    POLICY_FILE: "/etc/ringlimit/policy.yaml",
    STATE_PATH: "/var/lib/ringlimit",
    // not ours, not suspect
    HOME: "/root",
    PATH: "/usr/bin",
    HOSTNAME: "pod-0",
    PWD: "/app",
    NODE_ENV: "production",
    TERM: "xterm",
    USER: "node",
    SHELL: "/bin/sh",
    LANG: "C.UTF-8",
    KUBERNETES_PORT: "tcp://10.0.0.1:443",
    RINGLIMIT_SERVICE_HOST: "10.0.0.2",
    RINGLIMIT_SERVICE_PORT_HTTP: "8080",
    RINGLIMIT_PORT_8080_TCP_ADDR: "10.0.0.2",
    RINGLIMIT_PEERS_PORT: "tcp://10.0.0.3:9080",
    UWS_HTTP_MAX_HEADERS_SIZE: "8192",
    SSL_CERT_FILE: "/etc/ssl/certs/ca-certificates.crt",
    SSL_CERT_DIR: "/etc/ssl/certs",
  };
  const found = new Map(lookalikeVariables(env).map((f) => [f.name, f.suggestion]));
  t.same(
    Object.fromEntries(found),
    {
      API_KEY: "API_KEYS",
      RINGLIMIT_PORT: "PORT",
      RINGLIMIT_LOG_LEVEL: "LOG_LEVEL",
      CLUSTER_SECRTE: "CLUSTER_SECRET",
      port: "PORT",
      DNS_SERVERS: "DNS_SERVER",
      PEER_TIMEOUT: "PEER_TIMEOUT_MS",
      FAILURE_TIMEOUT: "FAILURE_TIMEOUT_MS",
      DRAIN_TIMEOUT_SECONDS: "DRAIN_TIMEOUT_MS",
      POLICY_FILE: "POLICY_PATH",
      STATE_PATH: "STATE_DIR",
    },
    "exactly the lookalikes, each with the variable meant",
  );
  t.same(lookalikeVariables({ RINGLIMIT_SOMETHING: "1" }), [{ name: "RINGLIMIT_SOMETHING", suggestion: undefined }], "our prefix alone is suspect");
  t.same(lookalikeVariables(Object.fromEntries(ENVIRONMENT_VARIABLES.map((n) => [n, "x"]))), [], "known variables are never warned about");

  // On a real node: a warning per lookalike at start-up, naming it and what was meant,
  // never its value; the node still starts.
  const node = await spawnNode({ API_KEY: "svc_sk_ValueNeverLogged0123456789abcdef", RINGLIMIT_PORT: "1234", LOG_LEVEL: "warn" });
  t.teardown(() => node.kill());
  // pino writes asynchronously: the lines may land after /ready answered.
  await eventually(() => (node.output().match(/is not a ringlimit variable/g) ?? []).length >= 2, 20_000);
  const warnings = node
    .output()
    .split("\n")
    .filter((l) => l.includes("is not a ringlimit variable"))
    .map((l) => JSON.parse(l) as { level: number; variable: string; didYouMean: string; msg: string });
  t.same(
    warnings.map((w) => [w.level, w.variable, w.didYouMean]).sort(),
    [
      [40, "API_KEY", "API_KEYS"],
      [40, "RINGLIMIT_PORT", "PORT"],
    ],
    "two warnings at level warn",
  );
  t.notOk(node.output().includes("ValueNeverLogged"), "the value is not logged");
});

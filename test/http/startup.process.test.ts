/**
 * Start-up of the real entry point (`node dist/src/main.js`): a bad setting ends it with
 * one line on stderr naming the variable; `keygen` prints a key and its SHA-256; hashed
 * keys work; with no key configured a generated one is logged once and works; and no API
 * key ever reaches the log, even at LOG_LEVEL=debug.
 */
import { createHash } from "node:crypto";
import t from "tap";
import { closeAgents, request, TEST_KEY } from "../harness/http-client.js";
import { spawnNode } from "../harness/node-process.js";
import { runMain } from "../harness/run-main.js";
import { pool, validBody } from "../harness/contract.js";
import { generateClusterSecret } from "../../src/peer/link/cluster-secret.js";
import { selfSignedCert } from "../harness/certs.js";

t.teardown(closeAgents);

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const limitWithKey = (url: string, key: string, body: unknown = validBody()) =>
  request(url + "/limit", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

t.test("bad configuration: non-zero exit, one stderr line naming the variable", async (t) => {
  const cert = await selfSignedCert(t, { commonName: "127.0.0.1" });
  const base = { HOST: "127.0.0.1", PORT: "0", API_KEYS: TEST_KEY, LOG_LEVEL: "info" };
  const cases: [what: string, env: Record<string, string>, args: string[], name: string][] = [
    ["PORT=abc", { PORT: "abc" }, [], "PORT"],
    ["PORT=70000", { PORT: "70000" }, [], "PORT"],
    ["PORT=-1", { PORT: "-1" }, [], "PORT"],
    ["--port abc overrides a good PORT", {}, ["--port", "abc"], "PORT"],
    ["--port=1.5", {}, ["--port=1.5"], "PORT"],
    ["PEERS without CLUSTER_SECRET", { PEERS: "127.0.0.1:9001,127.0.0.1:9002" }, [], "CLUSTER_SECRET"],
    ["PEERS_DNS without CLUSTER_SECRET", { PEERS_DNS: "ringlimit.local:9000" }, [], "CLUSTER_SECRET"],
    ["CLUSTER_SECRET too short", { PEERS: "127.0.0.1:9001", CLUSTER_SECRET: "short" }, [], "CLUSTER_SECRET"],
    ["PEERS not host:port", { PEERS: "nonsense", CLUSTER_SECRET: generateClusterSecret() }, [], "PEERS"],
    ["FAIL_OPEN=maybe", { FAIL_OPEN: "maybe" }, [], "FAIL_OPEN"],
    ["LOG_LEVEL=loud", { LOG_LEVEL: "loud" }, [], "LOG_LEVEL"],
    ["MAX_KEYS=0", { MAX_KEYS: "0" }, [], "MAX_KEYS"],
    ["PEER_TIMEOUT_MS=fast", { PEER_TIMEOUT_MS: "fast" }, [], "PEER_TIMEOUT_MS"],
    ["API_KEYS malformed", { API_KEYS: "svc_sk_short" }, [], "API_KEYS"],
    ["API_KEY_HASHES not hex", { API_KEY_HASHES: "zz" }, [], "API_KEY_HASHES"],
    ["TLS_CERT_FILE alone", { TLS_CERT_FILE: cert.certFile }, [], "TLS_KEY_FILE"],
    ["TLS files unreadable", { TLS_CERT_FILE: "/nonexistent/c.pem", TLS_KEY_FILE: "/nonexistent/k.pem" }, [], "TLS_CERT_FILE"],
    ["unknown flag", {}, ["--no-such-flag", "1"], "--no-such-flag"],
    ["positional argument", {}, ["serve"], "serve"],
  ];
  await pool(cases, 4, async ([what, env, args, name]) => {
    const run = await runMain(args, { ...base, ...env });
    t.not(run.code, 0, `${what}: non-zero exit (${run.code})`);
    t.equal(run.signal, null, `${what}: exited by itself`);
    const lines = run.stderr.split("\n").filter((l) => l !== "");
    t.equal(lines.length, 1, `${what}: one line on stderr: ${JSON.stringify(run.stderr)}`);
    t.ok(lines[0]?.includes(name), `${what}: names ${name}: ${lines[0]}`);
    t.notMatch(run.stderr, /\bat .*\.js|node_modules/, `${what}: no stack trace`);
    t.equal(run.stdout, "", `${what}: nothing on stdout (no start-up)`);
    t.notOk(run.stderr.includes(TEST_KEY), `${what}: no key in the message`);
  });
});

t.test("a secret in a bad setting is not echoed", async (t) => {
  const secretish = "svc_sk_" + "S3cr3t".repeat(3); // too short, so invalid
  const run = await runMain([], { HOST: "127.0.0.1", PORT: "0", API_KEYS: secretish });
  t.not(run.code, 0);
  t.match(run.stderr, /API_KEYS/);
  t.notOk(run.stderr.includes("S3cr3t"), "the bad key is not printed");
  const run2 = await runMain([], { HOST: "127.0.0.1", PORT: "0", API_KEYS: TEST_KEY, PEERS: "127.0.0.1:9001", CLUSTER_SECRET: "Sh0rtS3cret" });
  t.match(run2.stderr, /CLUSTER_SECRET/);
  t.notOk(run2.stderr.includes("Sh0rtS3cret"), "the cluster secret is not printed");
});

t.test("keygen prints a key and its SHA-256, and they match", async (t) => {
  const runs = await Promise.all([runMain(["keygen"], {}), runMain(["keygen"], {})]);
  const keys: string[] = [];
  for (const run of runs) {
    t.equal(run.code, 0);
    t.equal(run.stderr, "");
    const key = /\b(svc_sk_[A-Za-z0-9_-]+)/.exec(run.stdout)?.[1];
    const hash = /\b([0-9a-f]{64})\b/.exec(run.stdout)?.[1];
    t.ok(key, `a key in ${JSON.stringify(run.stdout)}`);
    t.ok(hash, "a 64-hex hash");
    t.ok(key!.length >= "svc_sk_".length + 32, `key has at least 32 secret characters (${key!.length - 7})`);
    t.equal(sha256(key!), hash, "the hash is the SHA-256 of the key");
    keys.push(key!);
  }
  t.not(keys[0], keys[1], "each run makes a new key");
});

t.test("API_KEY_HASHES: the hashed key is accepted, others are not", async (t) => {
  const gen = await runMain(["keygen"], {});
  const key = /\b(svc_sk_[A-Za-z0-9_-]+)/.exec(gen.stdout)![1]!;
  const hash = sha256(key);
  const n = await spawnNode({ API_KEYS: "", API_KEY_HASHES: `${"0".repeat(64)},${hash.toUpperCase()}` });
  t.teardown(() => n.kill());
  t.equal((await limitWithKey(n.url, key)).status, 200, "the key whose hash is configured");
  t.equal((await limitWithKey(n.url, TEST_KEY)).status, 401, "a key not configured");
  t.equal((await limitWithKey(n.url, hash)).status, 401, "the hash itself is not a key");
  t.equal((await limitWithKey(n.url, key + "x")).status, 401);
  t.notOk(n.output().includes(key), "the key is not in the log");
});

t.test("no key configured: one is generated, logged once, and works", async (t) => {
  const n = await spawnNode({ API_KEYS: "", LOG_LEVEL: "info" });
  t.teardown(() => n.kill());
  const m = /"generatedApiKey":"(svc_sk_[A-Za-z0-9_-]+)"/.exec(n.output());
  t.ok(m, "the generated key is in the log");
  const key = m![1]!;
  t.equal((await limitWithKey(n.url, key)).status, 200, "the generated key is accepted");
  t.equal((await limitWithKey(n.url, TEST_KEY)).status, 401, "another key is not");
  for (let i = 0; i < 5; i++) await limitWithKey(n.url, key);
  n.signal("SIGTERM");
  await n.exited;
  t.equal(n.output().split(key).length - 1, 1, "logged exactly once");
});

t.test("API keys never reach the log, even at debug level", async (t) => {
  const second = "svc_sk_" + "Z9".repeat(20);
  const wrong = "svc_sk_" + "W7rongKey".repeat(5);
  const n = await spawnNode({ API_KEYS: `${TEST_KEY},${second}`, LOG_LEVEL: "debug" });
  t.teardown(() => n.kill());
  t.equal((await limitWithKey(n.url, TEST_KEY)).status, 200);
  t.equal((await limitWithKey(n.url, second)).status, 200);
  t.equal((await limitWithKey(n.url, wrong)).status, 401);
  t.equal((await limitWithKey(n.url, TEST_KEY, "{bad json")).status, 400);
  t.equal((await limitWithKey(n.url, TEST_KEY, { limit: "x" })).status, 400);
  t.equal(
    (await request(n.url + "/limit", { method: "POST", headers: { authorization: `Basic ${Buffer.from("u:" + wrong).toString("base64")}` } })).status,
    401,
  );
  n.signal("SIGTERM");
  const exit = await n.exited;
  t.same(exit, { code: 0, signal: null });
  const out = n.output();
  t.ok(out.length > 0, "the node did log");
  for (const [what, secret] of [
    ["first key", TEST_KEY],
    ["second key", second],
    ["wrong key", wrong],
    ["secret part of the first key", TEST_KEY.slice(7)],
    ["secret part of the wrong key", wrong.slice(7)],
    ["basic credentials", Buffer.from("u:" + wrong).toString("base64")],
  ] as const) {
    t.notOk(out.includes(secret), `${what} is not in the log`);
  }
});

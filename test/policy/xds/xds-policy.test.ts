/**
 * XdsPolicy (the xDS client and the policy it keeps) against a real ADS server on grpc-js
 * with the package's .proto files (xds-server.ts), in this process: the first version is
 * applied and ACKed with its version and nonce; a config that does not load is NACKed with
 * the reason in error_detail while the last good policy stays; a server restart (the
 * version counter back at "1") is followed after a backoff, on a new stream that asks with
 * an empty version; mutual TLS works with the right certificates and fails without.
 */
import { Writable } from "node:stream";
import { pino } from "pino";
import { Registry } from "prom-client";
import t, { type Test } from "tap";
import { PolicyMetrics } from "../../../src/metrics/policy-metrics.js";
import type { Policy } from "../../../src/policy/index.js";
import { XdsPolicy, type XdsPolicyOptions } from "../../../src/policy/xds/index.js";
import { selfSignedCert } from "../../harness/certs.js";
import { freePort } from "../../harness/ports.js";
import { sleep, until } from "../../harness/wait.js";
import { startXdsServer, type Message, type XdsServer } from "./xds-server.js";

const perIp = (limit: number, domain = "edge") => ({
  name: `${domain}-config`,
  domain,
  descriptors: [{ key: "remote_address", rate_limit: { unit: "MINUTE", requests_per_unit: limit } }],
});

interface Rig {
  policy: XdsPolicy;
  changes: Policy[];
  lines: string[];
  registry: Registry;
}

function rig(t: Test, server: string, extra: Partial<XdsPolicyOptions> = {}): Rig {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).trim().split("\n"));
      done();
    },
  });
  const registry = new Registry();
  const changes: Policy[] = [];
  const policy = new XdsPolicy({
    serverUrl: server,
    nodeId: "envoy-ratelimit",
    nodeMetadata: { zone: "a" },
    headers: {},
    backoffInitialMs: 50,
    backoffMaxMs: 200,
    maxMessageBytes: 1 << 20,
    onChange: (p) => changes.push(p),
    logger: pino({ level: "debug" }, sink),
    metrics: new PolicyMetrics(registry),
    ...extra,
  });
  t.teardown(() => policy.stop());
  return { policy, changes, lines, registry };
}

const limitOf = (p: Policy, ip = "10.0.0.1", domain = "edge") => p.matchRequest(domain, [[{ key: "remote_address", value: ip }]])[0]?.rule.limit;
const acks = (server: XdsServer) => server.requests.filter((r: Message) => r.response_nonce !== "");

t.test("subscribes as its node, applies the first version and ACKs it with version and nonce", async (t) => {
  const server = await startXdsServer();
  t.teardown(() => server.close());
  server.set("1", [perIp(10)]);
  const { policy, changes } = rig(t, server.address);
  t.equal(policy.hasConfig, false, "no config before the first response");
  policy.start();
  await policy.firstConfig();
  t.equal(limitOf(policy.policy), 10, "the rule from xDS decides");
  t.equal(changes.length, 1);
  const first = server.requests[0];
  t.equal(first.node.id, "envoy-ratelimit", "node id");
  t.same(first.node.metadata.fields.zone.stringValue, "a", "node metadata");
  t.equal(first.type_url, "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig");
  t.same(first.resource_names, [], "every resource of the type (wildcard)");
  t.equal(first.version_info, "", "a new stream asks with no version");
  await until("the ACK", () => acks(server).length === 1);
  t.match(acks(server)[0], { version_info: "1", response_nonce: server.lastNonce(), error_detail: null }, "ACK: the version applied and the response's nonce");
  t.equal(policy.serverVersion, "1");

  server.set("2", [perIp(20)]);
  await until("version 2", () => limitOf(policy.policy) === 20);
  await until("its ACK", () => acks(server).length === 2);
  t.match(acks(server)[1], { version_info: "2", response_nonce: server.lastNonce() });

  // The same content under another version: ACKed, the policy (and its content-hash version) unchanged.
  const before = policy.policy.version;
  server.set("3", [perIp(20)]);
  await until("ACK of 3", () => acks(server).length === 3);
  t.equal(policy.policy.version, before, "same resources, same policy version");
  t.equal(changes.length, 2, "no change handed over for the same content");
});

t.test("a config that does not load is NACKed with the reason; the last good one stays", async (t) => {
  const server = await startXdsServer();
  t.teardown(() => server.close());
  server.set("1", [perIp(10)]);
  const { policy, registry } = rig(t, server.address);
  policy.start();
  await policy.firstConfig();
  await until("ACK of 1", () => acks(server).length === 1);

  const cases: [string, Message[], RegExp][] = [
    [
      "an unknown unit",
      [{ name: "x", domain: "edge", descriptors: [{ key: "k", rate_limit: { requests_per_unit: 5 } }] }],
      /invalid rate limit unit 'UNKNOWN'/,
    ],
    ["unlimited with a unit", [{ name: "x", domain: "edge", descriptors: [{ key: "k", rate_limit: { unit: "SECOND", unlimited: true } }] }], /unlimited/],
    ["an empty key", [{ name: "x", domain: "edge", descriptors: [{ key: "", rate_limit: { unit: "SECOND", requests_per_unit: 1 } }] }], /empty key/],
    ["a duplicate domain", [perIp(1), { ...perIp(2), name: "other" }], /duplicate domain 'edge'/],
    ["an empty domain", [{ name: "x", domain: "", descriptors: [] }], /empty domain/],
  ];
  let n = 1;
  for (const [what, configs, reason] of cases) {
    n++;
    server.set(String(n), configs);
    await until(`the NACK of ${what}`, () => acks(server).length === n);
    const nack = acks(server)[n - 1];
    t.equal(nack.version_info, "1", `${what}: NACK keeps the last applied version`);
    t.equal(nack.response_nonce, server.lastNonce(), `${what}: with the refused response's nonce`);
    t.equal(nack.error_detail?.code, 3, `${what}: INVALID_ARGUMENT`);
    t.match(nack.error_detail?.message, reason, `${what}: the reason`);
    t.equal(limitOf(policy.policy), 10, `${what}: the last good policy stays`);
  }
  // Bytes that are not a RateLimitConfig, and a resource of another type.
  server.setRaw("9", [{ type_url: "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig", value: Buffer.from([0x0a, 0xff, 0xff]) }]);
  await until("NACK of garbage", () => acks(server).length === n + 1);
  t.match(acks(server)[n].error_detail?.message, /not a RateLimitConfig/);
  server.setRaw("10", [{ type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster", value: Buffer.alloc(0) }]);
  await until("NACK of another type", () => acks(server).length === n + 2);
  t.match(acks(server)[n + 1].error_detail?.message, /not a RateLimitConfig/);
  t.equal(limitOf(policy.policy), 10);
  t.match(await registry.getSingleMetricAsString("ringlimit_policy_loads_total"), /result="error"} 7/, "each refusal counted");

  // A good one after the refusals is applied and ACKed.
  server.set("11", [perIp(30)]);
  await until("version 11", () => limitOf(policy.policy) === 30);
  await until("ACK of 11", () => acks(server).at(-1)?.version_info === "11" && acks(server).at(-1)?.error_detail === null);
});

t.test("the server restarts with its version back at 1: the client reconnects and applies it", async (t) => {
  const port = await freePort();
  let server = await startXdsServer({ port });
  server.set("7", [perIp(10)]);
  const { policy, lines } = rig(t, server.address);
  policy.start();
  await policy.firstConfig();
  await server.close();
  // Gone: the policy in force stays, whatever the wait.
  await until("the loss logged", () => lines.some((l) => l.includes("no stream to")));
  await sleep(300);
  t.equal(limitOf(policy.policy), 10, "the last good policy serves while the server is gone");
  server = await startXdsServer({ port });
  t.teardown(() => server.close());
  server.set("1", [perIp(40)]);
  await until("the restarted server's version 1", () => limitOf(policy.policy) === 40, 20_000);
  t.equal(server.requests[0].version_info, "", "the new stream asks with an empty version");
  await until("ACK of 1", () => acks(server).length === 1);
  t.match(acks(server)[0], { version_info: "1", error_detail: null }, "a version that went down is ACKed");
  t.equal(policy.serverVersion, "1");
});

t.test("a restarted server that serves the same version string with other content is still followed", async (t) => {
  const port = await freePort();
  let server = await startXdsServer({ port });
  server.set("1", [perIp(10)]);
  const { policy } = rig(t, server.address);
  policy.start();
  await policy.firstConfig();
  await server.close();
  server = await startXdsServer({ port });
  t.teardown(() => server.close());
  server.set("1", [perIp(50)]);
  await until("the new content under the old version string", () => limitOf(policy.policy) === 50, 20_000);
  t.pass("applied");
});

t.test("mutual TLS (TLS 1.3): the right client certificate subscribes; none is refused by the server", async (t) => {
  const serverCert = await selfSignedCert(t, { commonName: "envoy-gateway", ip: "127.0.0.1" });
  const clientCert = await selfSignedCert(t, { commonName: "envoy-ratelimit" });
  const server = await startXdsServer({ tls: { cert: serverCert.cert, key: serverCert.key, ca: clientCert.cert } });
  t.teardown(() => server.close());
  server.set("1", [perIp(10)]);
  const good = rig(t, server.address, { tls: { certFile: clientCert.certFile, keyFile: clientCert.keyFile, caFile: serverCert.certFile } });
  good.policy.start();
  await good.policy.firstConfig();
  t.equal(limitOf(good.policy.policy), 10, "config over mutual TLS");

  const anonymous = rig(t, server.address, { tls: { caFile: serverCert.certFile } });
  anonymous.policy.start();
  await until("the refusal logged", () => anonymous.lines.some((l) => l.includes("no stream to")));
  t.equal(anonymous.policy.hasConfig, false, "no client certificate: no config");

  const untrusting = rig(t, server.address, { tls: { certFile: clientCert.certFile, keyFile: clientCert.keyFile, caFile: clientCert.certFile } });
  untrusting.policy.start();
  await until("the refusal logged", () => untrusting.lines.some((l) => l.includes("no stream to")));
  t.equal(untrusting.policy.hasConfig, false, "a server certificate the CA does not vouch for: no config");
});

/**
 * A ringlimit node started with exactly the environment Envoy Gateway gives its rate limit
 * Deployment (internal/infrastructure/kubernetes/ratelimit/resource.go), plus free ports and
 * the harness's HOST and API key: it takes its configuration from an xDS server over mutual
 * TLS, answers RLS calls that present a client certificate (and refuses those that do not),
 * follows a new version, refuses a bad one (NACK) and keeps the last good, keeps serving while
 * the server is gone and follows it after a restart whose version went down; /healthcheck
 * answers throughout, and /metrics on PROMETHEUS_ADDR's port has envoyproxy/ratelimit's names.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { selfSignedCert } from "../../harness/certs.js";
import { AUTH_HEADER, request } from "../../harness/http-client.js";
import { spawnNode } from "../../harness/node-process.js";
import { freePort } from "../../harness/ports.js";
import { eventually, sleep, until } from "../../harness/wait.js";
import { grpcCode, oneDescriptor, rlsClient } from "../../rls/rls-client.js";
import { startXdsServer, type Message, type XdsServer } from "./xds-server.js";

const DOMAIN = "default/eg/http";
const ROUTE = "httproute/default/backend/rule/0/match/0/www_example_com";
/** A BackendTrafficPolicy's global limit as Envoy Gateway translates it: the route, then the rule's match. */
const egConfig = (limit: number) => ({
  name: DOMAIN,
  domain: DOMAIN,
  descriptors: [
    {
      key: ROUTE,
      value: ROUTE,
      descriptors: [{ key: "rule-0-match-0", value: "rule-0-match-0", rate_limit: { unit: "HOUR", requests_per_unit: limit } }],
    },
  ],
});
const call = () =>
  oneDescriptor(DOMAIN, [
    [ROUTE, ROUTE],
    ["rule-0-match-0", "rule-0-match-0"],
  ]);

t.test("Envoy Gateway's Deployment environment: xDS over mutual TLS, RLS with client certificates", async (t) => {
  // Envoy Gateway's certificates: the rate limit pod's (gRPC server and xDS client), the
  // gateway's (xDS server), Envoy's (the RLS caller); ca.crt vouches for all of them.
  const ratelimit = await selfSignedCert(t, { commonName: "envoy-ratelimit", ip: "127.0.0.1" });
  const gateway = await selfSignedCert(t, { commonName: "envoy-gateway", ip: "127.0.0.1" });
  const envoy = await selfSignedCert(t, { commonName: "envoy" });
  const caFile = path.join(path.dirname(ratelimit.certFile), "ca.crt");
  writeFileSync(caFile, Buffer.concat([gateway.cert, envoy.cert]));

  const xdsPort = await freePort();
  const serverTls = { cert: gateway.cert, key: gateway.key, ca: ratelimit.cert };
  let server: XdsServer = await startXdsServer({ port: xdsPort, tls: serverTls });
  t.teardown(() => server.close());
  const [grpcPort, prometheusPort] = [await freePort(), await freePort()];
  const node = await spawnNode({
    RUNTIME_ROOT: "/data",
    RUNTIME_SUBDIRECTORY: "ratelimit",
    RUNTIME_IGNOREDOTFILES: "true",
    RUNTIME_WATCH_ROOT: "false",
    LOG_LEVEL: "info",
    USE_STATSD: "false",
    USE_PROMETHEUS: "true",
    PROMETHEUS_ADDR: `:${prometheusPort}`,
    PROMETHEUS_MAPPER_YAML: "/etc/statsd-exporter/conf.yaml",
    CONFIG_TYPE: "GRPC_XDS_SOTW",
    CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${xdsPort}`,
    CONFIG_GRPC_XDS_NODE_ID: "envoy-ratelimit",
    GRPC_SERVER_USE_TLS: "true",
    GRPC_SERVER_TLS_CERT: ratelimit.certFile,
    GRPC_SERVER_TLS_KEY: ratelimit.keyFile,
    GRPC_SERVER_TLS_CA_CERT: caFile,
    CONFIG_GRPC_XDS_SERVER_USE_TLS: "true",
    CONFIG_GRPC_XDS_CLIENT_TLS_CERT: ratelimit.certFile,
    CONFIG_GRPC_XDS_CLIENT_TLS_KEY: ratelimit.keyFile,
    CONFIG_GRPC_XDS_SERVER_TLS_CACERT: caFile,
    FORCE_START_WITHOUT_INITIAL_CONFIG: "true",
    REDIS_SOCKET_TYPE: "tcp",
    REDIS_URL: "redis.redis.svc:6379",
    // The free ports (Envoy Gateway sets none: 8080 and 8081 are the defaults).
    GRPC_PORT: String(grpcPort),
    // Reconnections paced for a test; the defaults wait 1 s doubling to 60 s.
    XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: "100ms",
    XDS_CLIENT_BACKOFF_MAX_INTERVAL: "500ms",
  });
  t.teardown(() => node.kill());
  t.notMatch(node.output(), /is not a ringlimit variable/, "Envoy Gateway's other variables are known, not suspected misspellings");
  t.match(node.output(), /counts alone/, "a lone node says its replicas would count alone");

  const envoyClient = rlsClient(`127.0.0.1:${grpcPort}`, { ca: ratelimit.cert, clientCert: { cert: envoy.cert, key: envoy.key }, key: null });
  t.teardown(() => envoyClient.close());
  const healthcheck = async () => (await request(`${node.url}/healthcheck`)).status;

  t.equal(await healthcheck(), 200, "FORCE_START_WITHOUT_INITIAL_CONFIG: serving before any config");
  const before = await envoyClient.shouldRateLimit(call());
  t.match(before, { overall_code: "OK", statuses: [{ code: "OK" }] }, "no rule yet: OK");
  t.notOk(before.statuses[0].current_limit, "no current_limit");
  t.notOk(before.statuses[0].limit_remaining, "limit_remaining 0: nothing counted");

  server.set("1", [egConfig(3)]);
  await until("the rule from xDS", async () => (await envoyClient.shouldRateLimit(call())).statuses[0].current_limit !== undefined, 20_000);
  const ack = server.requests.find((r: Message) => r.response_nonce !== "");
  t.match(ack, { version_info: "1", node: { id: "envoy-ratelimit" }, error_detail: null }, "version 1 ACKed by node envoy-ratelimit");
  // The probe above was the first hit of the window; two more pass, the fourth is over.
  const answers = [await envoyClient.shouldRateLimit(call()), await envoyClient.shouldRateLimit(call()), await envoyClient.shouldRateLimit(call())];
  t.same(
    answers.map((a) => a.statuses[0].code),
    ["OK", "OK", "OVER_LIMIT"],
    "3 per hour",
  );
  t.match(answers[0].statuses[0].current_limit, { requests_per_unit: 3, unit: "HOUR" });

  // A caller without a client certificate never reaches the service, API key or not.
  const anonymous = rlsClient(`127.0.0.1:${grpcPort}`, { ca: ratelimit.cert });
  t.teardown(() => anonymous.close());
  t.equal((await grpcCode(anonymous.shouldRateLimit(call())))?.code, 14, "no client certificate: UNAVAILABLE (the handshake fails)");

  // The metrics Envoy Gateway's dashboards read, on PROMETHEUS_ADDR's port.
  const metrics = (await request(`http://127.0.0.1:${prometheusPort}/metrics`)).text;
  const labels = `domain="${DOMAIN}",key1="${ROUTE}_${ROUTE}",key2="rule-0-match-0_rule-0-match-0"`;
  t.match(metrics, `ratelimit_service_rate_limit_total_hits{${labels}} 4`, "total_hits");
  t.match(metrics, `ratelimit_service_rate_limit_over_limit{${labels}} 1`, "over_limit");
  t.match(metrics, `ratelimit_service_rate_limit_within_limit{${labels}} 3`, "within_limit");
  t.match(metrics, `ratelimit_service_rate_limit_near_limit{${labels}} 1`, "near_limit (3 of 3 is past 80 %)");

  // A version that does not load is NACKed; the node keeps answering from version 1.
  const cluster = async () => JSON.parse((await request(`${node.url}/cluster`, { headers: AUTH_HEADER })).text);
  const v1 = (await cluster()).data.members[0].policy_version;
  server.set("2", [{ name: DOMAIN, domain: DOMAIN, descriptors: [{ key: "k", rate_limit: { requests_per_unit: 1 } }] }]);
  await until("the NACK", () => server.requests.some((r: Message) => r.error_detail !== null && r.response_nonce === server.lastNonce()));
  t.match(server.requests.at(-1), { version_info: "1", error_detail: { message: /invalid rate limit unit/ } }, "NACK: version 1 kept, the reason given");
  t.equal((await envoyClient.shouldRateLimit(call())).statuses[0].code, "OVER_LIMIT", "still version 1's limit");
  t.equal((await cluster()).data.members[0].policy_version, v1, "GET /cluster: the policy version in force");

  // The management server goes away: the node keeps answering from what it has.
  await server.close();
  await sleep(500);
  t.equal(await healthcheck(), 200, "/healthcheck while the server is gone");
  t.equal((await envoyClient.shouldRateLimit(call())).statuses[0].code, "OVER_LIMIT", "the last good config serves");
  // It comes back with its in-memory counter at 1 again, and other limits.
  server = await startXdsServer({ port: xdsPort, tls: serverTls });
  server.set("1", [egConfig(100)]);
  await until(
    "the restarted server's version 1",
    async () => (await envoyClient.shouldRateLimit(call())).statuses[0].current_limit?.requests_per_unit === 100,
    30_000,
  );
  // GET /cluster follows: with WORKERS > 1 a worker answers it from the view the state owner
  // pushes every 50 ms (worker-pool.ts), so it may show the old version a moment longer.
  t.ok(await eventually(async () => (await cluster()).data.members[0].policy_version !== v1, 10_000), "a new policy version in force");
  t.match(node.output(), /in force \(was [0-9a-f]{12}\), xDS version 1"/, "the server's version logged");
});

/**
 * USE_PROMETHEUS on a real node: the envoyproxy/ratelimit metrics that its users' dashboards
 * read exist under the names its default statsd mapper gives (src/stats/prom/default_mapper.yaml
 * upstream): the service's calls, their time, their errors, and the policy's loads.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { closeAgents, post, request, TEST_KEY } from "../harness/http-client.js";
import { grpcCode, rlsClient } from "../rls/rls-client.js";
import { spawnNode } from "../harness/node-process.js";
import { freePort } from "../harness/ports.js";
import { until } from "../harness/wait.js";
import { policyDir } from "../harness/policy-dir.js";

t.teardown(closeAgents);

const POLICY = `domain: dash
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 100 }
`;

/** The value of one series in a /metrics text; undefined when the series is not there. */
function series(text: string, name: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(name + " "));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

t.test("ratelimit_service_* service totals, response time, errors and config loads on /metrics", async (t) => {
  const dir = policyDir(t, { "dash.yaml": POLICY });
  const promPort = await freePort();
  const grpcPort = await freePort();
  const node = await spawnNode({ POLICY_PATH: dir, USE_PROMETHEUS: "true", PROMETHEUS_ADDR: `:${promPort}`, GRPC_PORT: String(grpcPort) });
  t.teardown(() => node.kill());
  const rls = rlsClient(`127.0.0.1:${grpcPort}`, { key: TEST_KEY });
  t.teardown(() => rls.close());
  const scrape = async () => (await request(`http://127.0.0.1:${promPort}/metrics`)).text;

  let text = await scrape();
  t.equal(series(text, "ratelimit_service_config_load_success"), 1, "the start-up load");
  t.equal(series(text, "ratelimit_service_config_load_error"), 0);
  t.equal(series(text, 'ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}'), 0);
  t.equal(series(text, 'ratelimit_service_should_rate_limit_error{err_type="service_error"}'), 0);

  // Both doors of ShouldRateLimit: two calls over gRPC, one as POST /json.
  for (let i = 0; i < 2; i++) {
    const r = await rls.shouldRateLimit({ domain: "dash", descriptors: [{ entries: [{ key: "user", value: `u${i}` }] }] });
    t.equal(r.overall_code, "OK", `gRPC call ${i} answered`);
  }
  const json = await post(node.url, "/json", { domain: "dash", descriptors: [{ entries: [{ key: "user", value: "u2" }] }] });
  t.equal(json.status, 200, "the POST /json call answered");
  // A call the service refuses (no domain): answered INVALID_ARGUMENT, and an error.
  const bad = await grpcCode(rls.shouldRateLimit({ domain: "", descriptors: [{ entries: [{ key: "user", value: "x" }] }] }));
  t.equal(bad?.code, 3, "INVALID_ARGUMENT");

  text = await scrape();
  t.equal(series(text, 'ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}'), 4, "every call counted, the refused one too");
  t.equal(series(text, 'ratelimit_service_should_rate_limit_error{err_type="service_error"}'), 1, "the refused one as an error");
  t.equal(series(text, 'ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"}'), 4, "each call's time observed");
  t.equal(series(text, 'ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="+Inf"}'), 4);
  t.ok(series(text, 'ratelimit_service_response_time_seconds_sum{grpc_method="ShouldRateLimit"}')! > 0, "in seconds, above 0");

  // A policy that does not load: counted as an error (the last good one is kept), then a good one again.
  writeFileSync(path.join(dir, "dash.yaml"), "domain: dash\ndescriptors: [ {key: user, rate_limit: {unit: fortnight}} ]\n");
  await until("the failed reload counted", async () => series(await scrape(), "ratelimit_service_config_load_error") === 1, 30_000, 200);
  writeFileSync(path.join(dir, "dash.yaml"), POLICY.replace("100", "50"));
  await until("the good reload counted", async () => series(await scrape(), "ratelimit_service_config_load_success") === 2, 30_000, 200);
  t.equal(series(await scrape(), "ratelimit_service_config_load_error"), 1, "one error, no more");
});

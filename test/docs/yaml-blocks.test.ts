/**
 * Every YAML block of the docs an operator copies from (docs/envoy.md, docs/policy.md) parses,
 * and the Envoy configuration in docs/envoy.md says what the page promises: the rate limit
 * filter with a timeout and failure_mode_deny, the ringlimit cluster over HTTP/2, the key as
 * metadata; the settings the page names are settings ringlimit knows.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { parseAllDocuments } from "yaml";
import { ENVIRONMENT_VARIABLES } from "../../src/config.js";
import { RATELIMIT_IGNORED, RATELIMIT_VARIABLES } from "../../src/config/envoy-ratelimit.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

function yamlBlocks(doc: string): string[] {
  const text = readFileSync(path.join(ROOT, doc), "utf8");
  return [...text.matchAll(/```ya?ml\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;

const docs = ["docs/envoy.md", "docs/policy.md", "docs/envoy-gateway.md"].filter((d) => existsSync(path.join(ROOT, d)));

t.test("every YAML block of the docs parses", async (t) => {
  t.ok(docs.includes("docs/envoy.md"), "docs/envoy.md exists");
  for (const doc of docs) {
    const blocks = yamlBlocks(doc);
    t.ok(blocks.length > 0, `${doc} has YAML blocks`);
    blocks.forEach((block, i) => {
      for (const parsed of parseAllDocuments(block)) {
        t.same(
          parsed.errors.map((e) => e.message),
          [],
          `${doc}, block ${i + 1}`,
        );
      }
    });
  }
});

t.test("docs/envoy.md: the Envoy bootstrap, the Istio filters, the settings", async (t) => {
  const blocks = yamlBlocks("docs/envoy.md").flatMap((b) => parseAllDocuments(b).map((d) => d.toJS() as Any));
  const bootstrap = blocks.find((b) => b?.static_resources !== undefined);
  t.ok(bootstrap, "an Envoy bootstrap");
  const hcm = bootstrap.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const filter = hcm.http_filters.find((f: Any) => f.name === "envoy.filters.http.ratelimit").typed_config;
  t.equal(filter.failure_mode_deny, false, "failure_mode_deny is said");
  t.match(filter.timeout, /^\d+(\.\d+)?s$/, "a timeout");
  t.equal(filter.rate_limit_service.transport_api_version, "V3");
  t.same(filter.rate_limit_service.grpc_service.initial_metadata[0].key, "authorization", "the API key as metadata");
  t.match(filter.rate_limit_service.grpc_service.initial_metadata[0].value, /^Bearer svc_sk_/);
  const cluster = bootstrap.static_resources.clusters.find((c: Any) => c.name === filter.rate_limit_service.grpc_service.envoy_grpc.cluster_name);
  t.ok(cluster, "the filter's cluster is defined");
  const options = cluster.typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
  t.same(options.explicit_http_config, { http2_protocol_options: {} }, "the cluster speaks HTTP/2");
  t.equal(cluster.health_checks[0].grpc_health_check.service_name, "envoy.service.ratelimit.v3.RateLimitService");
  t.equal(blocks.filter((b) => b?.kind === "EnvoyFilter").length, 2, "two Istio EnvoyFilters");
  const text = readFileSync(path.join(ROOT, "docs/envoy.md"), "utf8");
  for (const setting of ["GRPC_PORT", "GRPC_AUTH", "SHADOW_MODE", "RLS_ALL_OR_NOTHING", "RLS_RATELIMIT_HEADERS", "FAIL_OPEN", "TLS_CERT_FILE"]) {
    t.ok(ENVIRONMENT_VARIABLES.includes(setting), `${setting} is a setting`);
    t.ok(text.includes("`" + setting + "`"), `docs/envoy.md documents ${setting}`);
  }
});

t.test("docs/envoy-gateway.md: every envoyproxy/ratelimit variable, read or ignored, and the objects to apply", async (t) => {
  const text = readFileSync(path.join(ROOT, "docs/envoy-gateway.md"), "utf8");
  for (const [name] of Object.values(RATELIMIT_VARIABLES)) t.ok(text.includes("`" + name), `${name} is documented`);
  for (const name of Object.keys(RATELIMIT_IGNORED)) t.ok(text.includes("`" + name + "`"), `${name} is listed as ignored`);
  const blocks: Any[] = yamlBlocks("docs/envoy-gateway.md").flatMap((b) => parseAllDocuments(b).map((d) => d.toJS()));
  const service = blocks.find((b) => b?.kind === "Service");
  t.equal(service?.spec.clusterIP, "None", "a headless Service");
  const config = blocks.find((b) => b?.kind === "ConfigMap");
  const eg: Any = parseAllDocuments(config.data["envoy-gateway.yaml"])[0]!.toJS();
  const deployment = eg.provider.kubernetes.rateLimitDeployment;
  const env = new Map<string, Any>(deployment.container.env.map((e: Any) => [e.name, e]));
  t.match(env.get("PEERS_DNS"), { value: /^envoy-ratelimit-peers\..*:9080$/ }, "PEERS_DNS names the headless Service");
  t.ok(env.get("CLUSTER_SECRET")?.valueFrom?.secretKeyRef, "CLUSTER_SECRET from a Secret");
  t.ok(deployment.replicas > 1);
  const kinds = blocks.map((b) => b?.kind).filter(Boolean);
  t.same(kinds.filter((k) => k === "BackendTrafficPolicy").length, 2, "global limits, and a token budget");
  const budget = blocks.find((b) => b?.metadata?.name === "token-budget");
  t.match(budget.spec.rateLimit.global.rules[0].cost, { request: { from: "Number", number: 0 }, response: { from: "Metadata" } });
});

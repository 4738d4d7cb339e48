/**
 * The deploy files, checked against a real node (kubeconform and a cluster are not available
 * here). Every YAML file and the dashboard parse; kustomize (`kubectl kustomize`, kustomize
 * v4 or later) renders the base and every overlay, and each rendered set is checked: every
 * environment variable is one `ringlimit --help` lists, and a real node started with the
 * StatefulSet's own settings becomes ready, requires its METRICS_TOKEN on /metrics and
 * exports MAX_KEYS and the snapshot interval that the alerts read, and with the policy ConfigMap's
 * files as POLICY_PATH answers Envoy's calls and grpc.health.v1 on its GRPC_PORT (the readiness
 * probe), and exports the policy version RinglimitPolicyMismatch reads; the image is set in one
 * place; no Secret value is committed; the pods meet the restricted Pod Security Standard;
 * probes, ServiceMonitor and NetworkPolicy use the ports the container declares; the admin
 * port is open to the scraper's namespace only; the base holds no custom resource, so it
 * applies on any cluster; every metric name in the alerts and the dashboard is one the node
 * exports, and no query assumes a job or pod label. Where kustomize cannot run, the rendering
 * checks skip with one message and the same checks run on the files as written.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { parseAllDocuments } from "yaml";
import { generateClusterSecret } from "../../src/peer/link/cluster-secret.js";
import { closeAgents, request, TEST_KEY } from "../harness/http-client.js";
import { spawnNode, type NodeProcess } from "../harness/node-process.js";
import { freePort } from "../harness/ports.js";
import { MAIN, ROOT } from "../harness/paths.js";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { oneDescriptor, rlsClient } from "../rls/rls-client.js";

t.teardown(closeAgents);

const K8S = path.join(ROOT, "deploy/kubernetes");

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

function parseYaml(text: string, source: string): Doc[] {
  const docs = parseAllDocuments(text, { merge: true });
  for (const d of docs) if (d.errors.length > 0) throw new Error(`${source}: ${d.errors.map((e) => e.message).join("; ")}`);
  return docs.map((d) => d.toJS()).filter((d) => d !== null);
}
const yamlFile = (file: string) => parseYaml(readFileSync(file, "utf8"), file);

const yamlFiles = walk(path.join(ROOT, "deploy")).filter((f) => /\.ya?ml$/.test(f));
const k8s = new Map(yamlFiles.filter((f) => f.startsWith(K8S + path.sep)).map((f) => [path.relative(ROOT, f), yamlFile(f)]));
const isKustomization = (d: Doc) => d.kind === "Kustomization" || d.kind === "Component";
const written: Doc[] = [...k8s.values()].flat().filter((d) => !isKustomization(d));
const compose = yamlFile(path.join(ROOT, "docker-compose.yml"))[0];
const dashboard = JSON.parse(readFileSync(path.join(ROOT, "deploy/grafana/ringlimit-dashboard.json"), "utf8")) as Doc;
const productionOverlay = k8s.get("deploy/kubernetes/overlays/production/kustomization.yaml")![0];
const ops = readFileSync(path.join(ROOT, "docs/operations.md"), "utf8");

/** The settings a node reads, as `ringlimit --help` lists them. */
const helpText = spawnSync(process.execPath, [MAIN, "--help"], { encoding: "utf8" }).stdout;
const SETTINGS = new Set([...helpText.matchAll(/^ {2}([A-Z][A-Z0-9_]+) {2}/gm)].map((m) => m[1]!));

/** The kustomize targets: the base and every overlay (components are rendered through them). */
const targets = ["base", ...readdirSync(path.join(K8S, "overlays")).map((o) => `overlays/${o}`)];

/** `kubectl kustomize` when kubectl is here with kustomize v4+ (components, `labels:`), else why not. */
function findKustomize(): { ok: true } | { ok: false; why: string } {
  const probe = spawnSync("kubectl", ["version", "--client", "-o", "json"], { encoding: "utf8", timeout: 60_000 });
  if (probe.error !== undefined) return { ok: false, why: `kubectl is not installed (${(probe.error as NodeJS.ErrnoException).code})` };
  const version = /"kustomizeVersion":\s*"v(\d+)\./.exec(probe.stdout)?.[1];
  if (version === undefined || Number(version) < 4)
    return { ok: false, why: `kubectl's kustomize is ${version ? "v" + version : "missing"}; v4 or later is needed` };
  return { ok: true };
}
const kustomize = findKustomize();
const rendered = new Map<string, Doc[]>();
if (kustomize.ok) {
  for (const target of targets) {
    const r = spawnSync("kubectl", ["kustomize", path.join(K8S, target)], { encoding: "utf8", timeout: 120_000 });
    if (r.status !== 0) throw new Error(`kubectl kustomize ${target} failed: ${r.stderr}`);
    rendered.set(target, parseYaml(r.stdout, `kubectl kustomize ${target}`));
  }
}
const SKIP_RENDER = kustomize.ok ? false : `kustomize cannot run here: ${kustomize.why}; install kubectl (kustomize v4+) to render the base and overlays`;

const kinds = (objects: Doc[], kind: string): Doc[] => objects.filter((o) => o.kind === kind);
const containerOf = (objects: Doc[]) => kinds(objects, "StatefulSet")[0].spec.template.spec.containers[0];
/** The ConfigMap the StatefulSet mounts at POLICY_PATH. */
function policyConfigMap(objects: Doc[]): Doc {
  const statefulSet = kinds(objects, "StatefulSet")[0];
  const container = containerOf(objects);
  const policyPath = (container.env as Doc[]).find((e) => e.name === "POLICY_PATH").value;
  const mount = (container.volumeMounts as Doc[]).find((m) => m.mountPath === policyPath);
  const volume = (statefulSet.spec.template.spec.volumes as Doc[]).find((v) => v.name === mount.name);
  return kinds(objects, "ConfigMap").find((c) => c.metadata.name === volume.configMap.name);
}

// ---- a real node, started with the StatefulSet's own settings ----

interface RealNode {
  exported: Set<string>;
  metrics: string;
  /** 127.0.0.1:<GRPC_PORT> */
  grpcAddress: string;
}
let realNode: Promise<RealNode> | undefined;
let started: NodeProcess | undefined;
const stateDir = mkdtempSync(path.join(tmpdir(), "manifests-state-"));
const policyDir = mkdtempSync(path.join(tmpdir(), "manifests-policy-"));
t.teardown(async () => {
  await started?.kill();
  rmSync(stateDir, { recursive: true, force: true });
  rmSync(policyDir, { recursive: true, force: true });
});
/** Started once: the StatefulSet's environment, with ports, addresses and secrets of this machine. */
function startRealNode(): Promise<RealNode> {
  realNode ??= (async () => {
    const container = containerOf(written);
    const env: Record<string, string> = {};
    for (const e of container.env as Doc[]) if (e.value !== undefined) env[e.name] = String(e.value);
    const peerPort = await freePort();
    delete env.PEERS_DNS; // a Kubernetes Service name: a one-member static ring stands in
    // The policy ConfigMap's files, in a folder as the pod's volume holds them.
    const policy = policyConfigMap(written);
    for (const [name, text] of Object.entries(policy.data as Record<string, string>)) writeFileSync(path.join(policyDir, name), text);
    const grpcPort = await freePort();
    Object.assign(env, {
      PORT: String(await freePort()),
      PEER_PORT: String(peerPort),
      METRICS_PORT: String(await freePort()),
      PEER_HOST: "127.0.0.1",
      PEERS: `127.0.0.1:${peerPort}`,
      STATE_DIR: stateDir,
      POLICY_PATH: policyDir,
      GRPC_PORT: String(grpcPort),
      LOG_LEVEL: "warn",
      METRICS_CACHE_MS: "0",
      // What the Secrets of docs/operations.md hold.
      CLUSTER_SECRET: generateClusterSecret(),
      API_KEY_HASHES: createHash("sha256").update(TEST_KEY).digest("hex"),
      METRICS_TOKEN: METRICS_TOKEN_VALUE,
    });
    const node = await spawnNode(env);
    started = node;
    const metricsUrl = `http://127.0.0.1:${env.METRICS_PORT}/metrics`;
    const unauthorized = await request(metricsUrl);
    if (unauthorized.status !== 401) throw new Error(`/metrics without the token answered ${unauthorized.status}`);
    const text = (await request(metricsUrl, { headers: { authorization: `Bearer ${METRICS_TOKEN_VALUE}` } })).text;
    const exported = new Set<string>();
    for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      exported.add(m[1]!);
      if (m[2] === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) exported.add(m[1]! + suffix);
    }
    return { exported, metrics: text, grpcAddress: `127.0.0.1:${grpcPort}` };
  })();
  return realNode;
}
const METRICS_TOKEN_VALUE = "manifest-test-metrics-token-" + generateClusterSecret().slice(0, 16);
const sample = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
/** A job or pod label matched, or grouped by: what a scrape setup other than ours lacks. (`on (job, instance)` only joins.) */
const LABEL_ASSUMED = /\b(job|pod)\s*(=|!=|=~|!~)|\bby\s*\([^)]*\b(job|pod)\b/;
const metricNames = (s: string) => [...s.matchAll(/\b((?:ringlimit|nodejs|process)_[a-z0-9_]+)\b/g)].map((m) => m[1]!);

// ---- checks of one set of objects (a rendered target, or the files as written) ----

function checkEnvironment(t: Test, objects: Doc[]): void {
  const container = containerOf(objects);
  for (const e of container.env as Doc[]) t.ok(SETTINGS.has(e.name), `${e.name} is a setting ringlimit --help lists`);
  const token = (container.env as Doc[]).find((e) => e.name === "METRICS_TOKEN");
  t.match(token, { valueFrom: { secretKeyRef: { name: String, key: String } } }, "METRICS_TOKEN comes from a Secret");
  t.same(
    container.envFrom.map((e: Doc) => e.secretRef.name),
    ["ringlimit"],
    "CLUSTER_SECRET and API_KEY_HASHES come from the ringlimit Secret",
  );
  t.same(kinds(objects, "Secret"), [], "no Secret committed: docs/operations.md creates them");
  const { name, key } = token.valueFrom.secretKeyRef;
  t.match(ops, new RegExp(`create secret generic ${name} \\\\\\n\\s+--from-literal=${key}=`), `docs/operations.md creates Secret ${name} with key ${key}`);
}

function checkPods(t: Test, objects: Doc[]): void {
  const statefulSet = kinds(objects, "StatefulSet")[0];
  const pod = statefulSet.spec.template.spec;
  const container = pod.containers[0];
  const ns = kinds(objects, "Namespace")[0];
  t.equal(ns.metadata.labels["pod-security.kubernetes.io/enforce"], "restricted");
  t.equal(pod.securityContext.runAsNonRoot, true);
  t.equal(pod.securityContext.seccompProfile.type, "RuntimeDefault");
  t.equal(container.securityContext.allowPrivilegeEscalation, false);
  t.same(container.securityContext.capabilities.drop, ["ALL"]);
  t.notOk(container.securityContext.privileged, "not privileged");
  t.notOk(pod.hostNetwork || pod.hostPID || pod.hostIPC, "no host namespaces");
  t.notOk(
    (pod.volumes ?? []).some((v: Doc) => v.hostPath),
    "no hostPath",
  );
  t.equal(pod.enableServiceLinks, false, "no service-link variables that look like ours");
  t.ok(
    pod.topologySpreadConstraints.some((c: Doc) => c.topologyKey === "kubernetes.io/hostname"),
    "spread over nodes",
  );
  const ports = new Map((container.ports as { name: string; containerPort: number }[]).map((p) => [p.name, p.containerPort]));
  const env = new Map((container.env as { name: string; value: string }[]).map((e) => [e.name, e.value]));
  t.equal(String(ports.get("metrics")), env.get("METRICS_PORT"), "the metrics port is METRICS_PORT");
  t.equal(String(ports.get("peer")), env.get("PEER_PORT"));
  t.equal(String(ports.get("http")), env.get("PORT"));
  for (const probe of ["startupProbe", "livenessProbe"]) {
    t.equal(container[probe].httpGet.port, "metrics", `${probe} on the admin port (plain HTTP even with TLS on)`);
    t.equal(container[probe].httpGet.path, "/health", `${probe}: /health`);
  }
  // gRPC: Kubernetes' own probe of grpc.health.v1, which takes a port number, not a name.
  t.equal(String(ports.get("grpc")), env.get("GRPC_PORT"), "the grpc port is GRPC_PORT");
  t.same(container.readinessProbe.grpc, { port: ports.get("grpc") }, "readiness: grpc.health.v1 on GRPC_PORT");
  t.ok(
    kinds(objects, "Service").some((s) => s.metadata.name === "ringlimit" && s.spec.ports.some((p: Doc) => p.name === "grpc" && p.targetPort === "grpc")),
    "the ringlimit Service serves the grpc port",
  );
  // POLICY_PATH: the ConfigMap, mounted read-only as a folder (not subPath: a subPath never sees an update).
  const mount = (container.volumeMounts as Doc[]).find((m) => m.mountPath === env.get("POLICY_PATH"));
  t.ok(mount, "a volume is mounted at POLICY_PATH");
  t.equal(mount.readOnly, true, "read-only");
  t.equal(mount.subPath, undefined, "the whole folder, so ConfigMap updates reach it");
  const configMap = policyConfigMap(objects);
  t.ok(configMap, "the volume is a ConfigMap of these objects");
  t.ok(
    Object.keys(configMap.data).length > 0 && Object.keys(configMap.data).every((k) => /\.ya?ml$/.test(k)),
    "its keys are *.yaml files, the names POLICY_PATH's folder reads",
  );
  const drainMs = Number(env.get("DRAIN_TIMEOUT_MS"));
  t.ok(pod.terminationGracePeriodSeconds * 1000 > drainMs + 5000, "grace period > preStop + DRAIN_TIMEOUT_MS");
  const dnsName = env.get("PEERS_DNS")!.split(":")[0];
  t.ok(
    kinds(objects, "Service").some((s) => s.metadata.name === dnsName && s.spec.clusterIP === "None" && s.spec.publishNotReadyAddresses === true),
    "PEERS_DNS names the headless Service",
  );
  const claim = statefulSet.spec.volumeClaimTemplates[0];
  t.equal(claim.spec.storageClassName, undefined, "the state volumes take the default StorageClass");
  t.match(ops, /default StorageClass/, "which docs/operations.md says they need");
}

function checkNetworkPolicy(t: Test, objects: Doc[]): void {
  const policy = kinds(objects, "NetworkPolicy")[0];
  const podLabels = kinds(objects, "StatefulSet")[0].spec.template.metadata.labels;
  t.same(policy.spec.podSelector.matchLabels, { "app.kubernetes.io/name": podLabels["app.kubernetes.io/name"] });
  const rulesFor = (port: string) => policy.spec.ingress.filter((r: Doc) => r.ports.some((p: Doc) => p.port === port));
  t.ok(
    rulesFor("grpc").some((r: Doc) => r.from === undefined),
    "callers (Envoy, wherever it runs) reach the grpc port",
  );
  t.equal(rulesFor("peer").length, 1, "one rule opens the peer port");
  t.same(rulesFor("peer")[0].from, [{ podSelector: { matchLabels: { "app.kubernetes.io/name": "ringlimit" } } }], "from ringlimit pods only");
  const metrics = rulesFor("metrics");
  t.equal(metrics.length, 1, "one rule opens the admin port");
  t.equal(metrics[0].from?.length, 1, "from one source");
  const from = metrics[0].from[0];
  t.notOk(from.podSelector, "a namespace, not pods in every namespace");
  t.match(from.namespaceSelector, { matchLabels: { "kubernetes.io/metadata.name": /^[a-z0-9-]+$/ } }, "the scraper's namespace, by its name label");
  t.equal(Object.keys(from.namespaceSelector.matchLabels ?? {}).length, 1);
  t.notOk(from.namespaceSelector.matchExpressions, "and nothing wider");
}

function checkServiceMonitor(t: Test, objects: Doc[]): void {
  const monitor = kinds(objects, "ServiceMonitor")[0];
  const selected = kinds(objects, "Service").filter((s) => Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => s.metadata.labels?.[k] === v));
  t.equal(selected.length, 1, "the ServiceMonitor selects one Service");
  const endpoint = monitor.spec.endpoints[0];
  t.ok(
    selected[0].spec.ports.some((p: Doc) => p.name === endpoint.port && p.targetPort === "metrics"),
    "its port is the container's metrics port",
  );
  const token = (containerOf(objects).env as Doc[]).find((e) => e.name === "METRICS_TOKEN").valueFrom.secretKeyRef;
  t.same(endpoint.authorization, { type: "Bearer", credentials: token }, "it sends the METRICS_TOKEN the pods read, from the same Secret key");
}

async function checkAlerts(t: Test, objects: Doc[]): Promise<void> {
  const { exported, metrics } = await startRealNode();
  const rules = kinds(objects, "PrometheusRule")[0].spec.groups.flatMap((g: Doc) => g.rules) as { alert: string; expr: string; annotations: Doc }[];
  const ruleNames = new Set(rules.flatMap((r) => metricNames(r.expr)));
  for (const name of ruleNames) t.ok(exported.has(name), `alert metric ${name} is exported`);
  for (const r of rules) {
    t.notMatch(r.expr, LABEL_ASSUMED, `${r.alert}: no job/pod label assumed`);
    t.notMatch(JSON.stringify(r.annotations), /\$labels\.(job|pod)\b/, `${r.alert}: its text names no job/pod label`);
    t.notMatch(r.expr, /\d{4,}|\*\s*\d/, `${r.alert}: no setting written as a constant (such as MAX_KEYS, or 3 * 5 s)`);
  }
  // The settings the alerts compare with come from the node, with the manifests' values.
  const env = new Map((containerOf(objects).env as Doc[]).map((e) => [e.name, e.value]));
  const byName = (alert: string) => rules.find((r) => r.alert === alert)!.expr;
  t.match(byName("RinglimitTableNearlyFull"), /ringlimit_stored_keys > 0\.9 \* ringlimit_max_keys/);
  t.equal(sample(metrics, "ringlimit_max_keys"), Number(env.get("MAX_KEYS")), "ringlimit_max_keys is MAX_KEYS");
  t.match(byName("RinglimitSnapshotStale"), /> 3 \* ringlimit_snapshot_interval_seconds/);
  t.equal(
    sample(metrics, "ringlimit_snapshot_interval_seconds"),
    Number(env.get("SNAPSHOT_INTERVAL_MS")) / 1000,
    "ringlimit_snapshot_interval_seconds is SNAPSHOT_INTERVAL_MS",
  );
  t.match(byName("RinglimitMemoryNearlyFull"), /ringlimit_stored_bytes > 0\.9 \* ringlimit_stored_bytes_limit/);
  t.equal(sample(metrics, "ringlimit_stored_bytes_limit"), Number(env.get("MAX_MEMORY_MB")) * 1024 * 1024, "ringlimit_stored_bytes_limit is MAX_MEMORY_MB");
  t.match(byName("RinglimitPolicyMismatch"), /count\(count by \(version\) \(ringlimit_policy_info\)\) > 1/);
  t.match(metrics, /^ringlimit_policy_info\{version="[0-9a-f]+"\} 1$/m, "the node exports the version of the policy it runs");

  // The alerts docs/operations.md lists are the ones the PrometheusRule has.
  const table = ops.slice(ops.indexOf("## Metrics and the alerts worth setting"));
  for (const row of table.split("\n").filter((l) => l.startsWith("| `"))) {
    const cells = row.split(/(?<!\\)\|/).map((c) => c.trim()); // "\|" inside a cell is a literal pipe (Markdown)
    if (cells[3] === "none") continue;
    // The metric an alert is about: the one the Alert cell names, else the first of the
    // Metric cell (a trailing "_" is a wildcard such as ringlimit_snapshot_*).
    const concrete = (cell: string) => metricNames(cell).filter((n) => !n.endsWith("_"));
    const metric = concrete(cells[3]!)[0] ?? concrete(cells[1]!)[0] ?? "nodejs_eventloop_lag_p99_seconds";
    t.ok(
      [...ruleNames].some((n) => n === metric || n === metric + "_bucket"),
      `an alert uses ${metric} (${cells[3]})`,
    );
  }
}

/** The objects as written, with the labels the base's kustomization adds to each. */
function withBaseLabels(objects: Doc[]): Doc[] {
  const base = k8s.get("deploy/kubernetes/base/kustomization.yaml")![0];
  const pairs = Object.assign({}, ...(base.labels as Doc[]).map((l) => l.pairs));
  return objects.map((o) => ({ ...o, metadata: { ...o.metadata, labels: { ...o.metadata.labels, ...pairs } } }));
}

// ---- the tests ----

t.test("every file parses; every kustomization's resources and components exist", async (t) => {
  t.ok(yamlFiles.length >= 10, `${yamlFiles.length} YAML files under deploy/`);
  for (const o of written) t.match(o, { apiVersion: String, kind: String, metadata: { name: String } }, `${o.kind}/${o.metadata?.name}`);
  for (const [file, docs] of k8s) {
    for (const k of docs.filter(isKustomization)) {
      for (const r of [...(k.resources ?? []), ...(k.components ?? [])]) {
        const target = path.resolve(ROOT, path.dirname(file), r);
        t.ok(
          walk(path.dirname(target)).some((f) => f === target || f.startsWith(target + path.sep)),
          `${file}: ${r} exists`,
        );
      }
    }
  }
  t.same(kinds(written, "Secret"), []);
});

t.test("the image is named in the base and set in one place, the production overlay", async (t) => {
  t.equal(containerOf(written).image, "ringlimit", "the base names the image without registry or tag");
  t.equal(productionOverlay.images.length, 1);
  t.equal(productionOverlay.images[0].name, "ringlimit", "the overlay's images entry rewrites the base's image");
  t.match(productionOverlay.images[0], { newName: String, newTag: String });
  const mentions = [...k8s.entries()].filter(([, docs]) => JSON.stringify(docs).includes('"image"')).map(([f]) => f);
  t.same(mentions, ["deploy/kubernetes/base/statefulset.yaml"], "one container image field in the base");
  const setters = [...k8s.entries()].filter(([, docs]) => docs.some((d) => d.images !== undefined)).map(([f]) => f);
  t.same(setters, ["deploy/kubernetes/overlays/production/kustomization.yaml"], "one images: entry");
});

t.test("the files as written", async (t) => {
  t.test("settings", async (t) => checkEnvironment(t, written));
  t.test("pods", async (t) => checkPods(t, written));
  t.test("NetworkPolicy", async (t) => checkNetworkPolicy(t, written));
  t.test("ServiceMonitor", async (t) => checkServiceMonitor(t, withBaseLabels(written)));
  t.test("alerts", async (t) => checkAlerts(t, written));
});

t.test("kustomize renders the base and every overlay", { skip: SKIP_RENDER }, async (t) => {
  t.same([...rendered.keys()], targets);
  t.ok(targets.length >= 3, `${targets.join(", ")}`);
  for (const [target, objects] of rendered) {
    t.test(target, async (t) => {
      for (const o of objects) {
        t.match(
          o,
          { apiVersion: String, kind: String, metadata: { name: String, labels: { "app.kubernetes.io/name": "ringlimit" } } },
          `${o.kind}/${o.metadata.name} is labelled`,
        );
        if (o.kind !== "Namespace") t.equal(o.metadata.namespace, "ringlimit", `${o.kind}/${o.metadata.name} is in the ringlimit namespace`);
      }
      const image = containerOf(objects).image;
      const { newName, newTag } = productionOverlay.images[0];
      t.equal(image, target === "base" ? "ringlimit" : `${newName}:${newTag}`, `the image is ${image}`);
      checkEnvironment(t, objects);
      checkPods(t, objects);
      checkNetworkPolicy(t, objects);
      const custom = objects.filter((o) => !/^(v1|apps\/v1|policy\/v1|networking\.k8s\.io\/v1)$/.test(o.apiVersion));
      if (target === "base") t.same(custom, [], "the base holds built-in kinds only: it applies on any cluster");
      if (custom.length > 0) {
        t.same(custom.map((o) => o.kind).sort(), ["PrometheusRule", "ServiceMonitor"], "the Prometheus Operator's objects come together");
        checkServiceMonitor(t, objects);
        await checkAlerts(t, objects);
      }
    });
  }
  t.ok(
    [...rendered.values()].some((objects) => kinds(objects, "ServiceMonitor").length === 1),
    "an overlay brings the ServiceMonitor and PrometheusRule",
  );
});

t.test("the policy ConfigMap is what a node started with the StatefulSet's settings runs, and its readiness probe answers", async (t) => {
  const { grpcAddress } = await startRealNode();
  const rls = rlsClient(grpcAddress, { key: TEST_KEY });
  t.teardown(() => rls.close());
  t.same(await rls.check(), { status: "SERVING" }, "grpc.health.v1 Check with no service name, as Kubernetes' gRPC probe asks");
  const answer = await rls.shouldRateLimit(oneDescriptor("edge", [["remote_address", "198.51.100.1"]]));
  t.same(answer.statuses[0].current_limit, { requests_per_unit: 100, unit: "MINUTE" }, "the example policy's rule for a client address");
  const health = await rls.shouldRateLimit(oneDescriptor("edge", [["generic_key", "health"]]));
  t.equal(health.statuses[0].limit_remaining, 4_294_967_295, "its unlimited rule");
});

t.test("docker compose: restart, drain time, ADVERTISE_URL and a state volume per node", async (t) => {
  const composeEnv = Object.keys(compose["x-node"].environment);
  const volumes = new Set(Object.keys(compose.volumes ?? {}));
  const seen = new Set<string>();
  for (const [name, service] of Object.entries(compose.services) as [string, Doc][]) {
    const merged = { ...compose["x-node"], ...service };
    const env = { ...compose["x-node"].environment, ...service.environment };
    for (const key of Object.keys(env)) t.ok(SETTINGS.has(key), `${name}: ${key} is a setting`);
    t.equal(merged.restart, "unless-stopped", `${name} restarts`);
    t.ok(Number.parseInt(merged.stop_grace_period, 10) * 1000 > Number(env.DRAIN_TIMEOUT_MS), `${name}: grace > drain`);
    t.ok(!("API_KEYS" in env) && "API_KEY_HASHES" in env, `${name}: hashed keys only`);
    // The host port published for the container's PORT is where ADVERTISE_URL points.
    const published = (merged.ports as string[]).map((p) => p.split(":")).find((p) => p[p.length - 1] === env.PORT);
    t.ok(published, `${name} publishes PORT`);
    t.equal(env.ADVERTISE_URL, `http://127.0.0.1:${published![published!.length - 2]}`, `${name}: ADVERTISE_URL is its published port`);
    const metricsPublished = (merged.ports as string[]).find((p) => p.endsWith(`:${env.METRICS_PORT}`));
    t.match(metricsPublished, /^127\.0\.0\.1:/, `${name}: the admin port is published on the host's loopback only`);
    const mount = (merged.volumes as string[]).map((v) => v.split(":")).find(([, target]) => target === env.STATE_DIR);
    t.ok(mount, `${name}: a volume at STATE_DIR`);
    t.ok(volumes.has(mount![0]!), `${name}: ${mount![0]} is a named volume`);
    t.notOk(seen.has(mount![0]!), `${name}: its own volume`);
    seen.add(mount![0]!);
  }
  t.ok(composeEnv.includes("STATE_DIR"));
  const dockerfile = readFileSync(path.join(ROOT, "Dockerfile"), "utf8");
  t.match(dockerfile, new RegExp(`mkdir -p ${compose["x-node"].environment.STATE_DIR} && chown node:node`), "the image's STATE_DIR belongs to the node user");
});

t.test("dashboard metric names are exported, and no panel assumes a job or pod label", async (t) => {
  const { exported } = await startRealNode();
  const panels = dashboard.panels as { title: string; targets: { expr: string; legendFormat?: string }[] }[];
  t.ok(panels.length >= 8, `${panels.length} dashboard panels`);
  for (const p of panels) {
    for (const target of p.targets) {
      for (const name of metricNames(target.expr)) t.ok(exported.has(name), `${p.title}: ${name} is exported`);
      t.notMatch(target.expr, LABEL_ASSUMED, `${p.title}: no job/pod label assumed`);
      t.notMatch(target.legendFormat ?? "", /\{\{\s*(job|pod)\s*\}\}/, `${p.title}: legend names no job/pod label`);
    }
  }
});

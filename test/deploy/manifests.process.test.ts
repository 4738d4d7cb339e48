/**
 * The deploy files, checked in JavaScript (kubeconform is not available here): every YAML
 * document and the dashboard JSON parse; every environment variable they set is one
 * src/config.ts knows; the image is set in one place (the overlay); no Secret values are
 * committed; the pods meet the restricted Pod Security Standard; probes, ServiceMonitor
 * and NetworkPolicy use the ports the container declares; and every metric name in the
 * alerts and the dashboard is one a real node exports on /metrics.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { ROOT } from "../harness/paths.js";
import t from "tap";
import { parseAllDocuments } from "yaml";
import { ENVIRONMENT_VARIABLES, generateClusterSecret } from "../../src/config.js";
import { closeAgents, request } from "../harness/http-client.js";
import { spawnNode } from "../harness/node-process.js";
import { freePort } from "../harness/ports.js";

t.teardown(closeAgents);

const KNOWN = new Set(ENVIRONMENT_VARIABLES);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

function yamlDocs(file: string): Doc[] {
  const docs = parseAllDocuments(readFileSync(file, "utf8"), { merge: true });
  for (const d of docs) if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join("; ")}`);
  return docs.map((d) => d.toJS()).filter((d) => d !== null);
}

const yamlFiles = walk(path.join(ROOT, "deploy")).filter((f) => /\.ya?ml$/.test(f));
const k8s = new Map(yamlFiles.filter((f) => f.includes(`${path.sep}kubernetes${path.sep}`)).map((f) => [path.relative(ROOT, f), yamlDocs(f)]));
const objects: Doc[] = [...k8s.values()].flat().filter((d) => d.kind !== "Kustomization");
const byKind = (kind: string): Doc[] => objects.filter((o) => o.kind === kind);
const statefulSet = byKind("StatefulSet")[0];
const pod = statefulSet?.spec.template.spec;
const container = pod?.containers[0];
const compose = yamlDocs(path.join(ROOT, "docker-compose.yml"))[0];
const dashboard = JSON.parse(readFileSync(path.join(ROOT, "deploy/grafana/ringlimit-dashboard.json"), "utf8")) as Doc;

t.test("every document parses and names itself", async (t) => {
  t.ok(yamlFiles.length >= 9, `${yamlFiles.length} YAML files under deploy/`);
  for (const o of objects) {
    t.match(o, { apiVersion: String, kind: String, metadata: { name: String } }, `${o.kind}/${o.metadata?.name}`);
  }
  t.same(byKind("Secret"), [], "no Secret committed: it is created by the command in docs/operations.md");
});

t.test("kustomize: every resource exists, the image is set only in the overlay", async (t) => {
  for (const [file, docs] of k8s) {
    for (const k of docs.filter((d) => d.kind === "Kustomization")) {
      for (const r of k.resources ?? []) {
        const target = path.resolve(ROOT, path.dirname(file), r);
        t.ok(
          walk(path.dirname(target)).some((f) => f === target || f.startsWith(target + path.sep)),
          `${file}: resource ${r} exists`,
        );
      }
    }
  }
  const overlay = k8s.get("deploy/kubernetes/overlays/production/kustomization.yaml")![0];
  t.equal(container.image, "ringlimit", "the base names the image without registry or tag");
  t.equal(overlay.images.length, 1);
  t.equal(overlay.images[0].name, container.image, "the overlay's images entry rewrites the base's image");
  t.match(overlay.images[0], { newName: String, newTag: String });
  const mentions = [...k8s.entries()].filter(([, docs]) => JSON.stringify(docs).includes('"image"')).map(([f]) => f);
  t.same(mentions, ["deploy/kubernetes/base/statefulset.yaml"], "one container image field in the base");
});

t.test("every environment variable set is one src/config.ts reads", async (t) => {
  const k8sEnv = (container.env as { name: string }[]).map((e) => e.name);
  const composeEnv = Object.keys(compose["x-node"].environment);
  for (const service of Object.values(compose.services) as Doc[]) composeEnv.push(...Object.keys(service.environment));
  for (const name of [...k8sEnv, ...composeEnv]) t.ok(KNOWN.has(name), `${name} is a known variable`);
  t.ok(composeEnv.includes("API_KEY_HASHES") && !composeEnv.includes("API_KEYS"), "compose uses hashed keys only");
  const opsDoc = readFileSync(path.join(ROOT, "docs/operations.md"), "utf8");
  for (const name of ["CLUSTER_SECRET", "API_KEY_HASHES"]) t.match(opsDoc, new RegExp(`--from-literal=${name}=`), `the Secret command sets ${name}`);
});

t.test("docker compose: restart policy and drain time on every node", async (t) => {
  for (const [name, service] of Object.entries(compose.services) as [string, Doc][]) {
    const merged = { ...compose["x-node"], ...service };
    t.equal(merged.restart, "unless-stopped", `${name} restarts`);
    t.ok(Number.parseInt(merged.stop_grace_period, 10) * 1000 > Number(compose["x-node"].environment.DRAIN_TIMEOUT_MS), `${name}: grace > drain`);
  }
});

t.test("restricted Pod Security, spread, probes on the plain-HTTP admin port", async (t) => {
  const ns = byKind("Namespace")[0];
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
  for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    t.equal(container[probe].httpGet.port, "metrics", `${probe} on the admin port (plain HTTP even with TLS on)`);
  }
  t.equal(container.readinessProbe.httpGet.path, "/ready");
  const drainMs = Number(env.get("DRAIN_TIMEOUT_MS"));
  t.ok(pod.terminationGracePeriodSeconds * 1000 > drainMs + 5000, "grace period > preStop + DRAIN_TIMEOUT_MS");
  const dnsName = env.get("PEERS_DNS")!.split(":")[0];
  t.ok(
    byKind("Service").some((s) => s.metadata.name === dnsName && s.spec.clusterIP === "None" && s.spec.publishNotReadyAddresses === true),
    "PEERS_DNS names the headless Service",
  );
});

t.test("NetworkPolicy: only members reach the peer port; ServiceMonitor scrapes METRICS_PORT", async (t) => {
  const policy = byKind("NetworkPolicy")[0];
  const podLabels = statefulSet.spec.template.metadata.labels;
  t.same(policy.spec.podSelector.matchLabels, { "app.kubernetes.io/name": podLabels["app.kubernetes.io/name"] });
  const peerRules = policy.spec.ingress.filter((r: Doc) => r.ports.some((p: Doc) => p.port === "peer" || p.port === 9080));
  t.equal(peerRules.length, 1, "one rule opens the peer port");
  t.same(peerRules[0].from, [{ podSelector: { matchLabels: { "app.kubernetes.io/name": "ringlimit" } } }], "from ringlimit pods only");
  const monitor = byKind("ServiceMonitor")[0];
  const selected = byKind("Service").filter((s) =>
    Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => ({ ...s.metadata.labels, "app.kubernetes.io/name": "ringlimit" })[k] === v),
  );
  t.equal(selected.length, 1, "the ServiceMonitor selects one Service");
  t.ok(
    selected[0].spec.ports.some((p: Doc) => p.name === monitor.spec.endpoints[0].port && p.targetPort === "metrics"),
    "its port is the container's metrics port",
  );
});

t.test("alert and dashboard metric names are the ones a real node exports", async (t) => {
  // A one-member cluster, so the cluster metrics are registered too.
  const peerPort = await freePort();
  const node = await spawnNode({
    PEER_HOST: "127.0.0.1",
    PEER_PORT: String(peerPort),
    PEERS: `127.0.0.1:${peerPort}`,
    CLUSTER_SECRET: generateClusterSecret(),
  });
  t.teardown(() => node.kill());
  const text = (await request(node.url + "/metrics")).text;
  const exported = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    exported.add(m[1]!);
    if (m[2] === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) exported.add(m[1]! + suffix);
  }
  t.ok(exported.has("ringlimit_peer_up"), "cluster metrics present");
  const names = (s: string) => [...s.matchAll(/\b((?:ringlimit|nodejs|process)_[a-z0-9_]+)\b/g)].map((m) => m[1]!);

  const rules = byKind("PrometheusRule")[0].spec.groups.flatMap((g: Doc) => g.rules) as { alert: string; expr: string }[];
  const ruleNames = new Set(rules.flatMap((r) => names(r.expr)));
  for (const name of ruleNames) t.ok(exported.has(name), `alert metric ${name} is exported`);
  const panels = dashboard.panels as { title: string; targets: { expr: string }[] }[];
  t.ok(panels.length >= 8, `${panels.length} dashboard panels`);
  for (const p of panels) for (const target of p.targets) for (const name of names(target.expr)) t.ok(exported.has(name), `${p.title}: ${name} is exported`);

  // The alerts docs/operations.md lists are the ones the PrometheusRule has.
  const ops = readFileSync(path.join(ROOT, "docs/operations.md"), "utf8");
  const table = ops.slice(ops.indexOf("## Metrics and the alerts worth setting"));
  for (const row of table.split("\n").filter((l) => l.startsWith("| `"))) {
    const cells = row.split(/(?<!\\)\|/).map((c) => c.trim()); // "\|" inside a cell is a literal pipe (Markdown)
    if (cells[3] === "none") continue;
    // The metric an alert is about: the one the Alert cell names, else the first of the
    // Metric cell (a trailing "_" is a wildcard such as ringlimit_snapshot_*).
    const concrete = (cell: string) => names(cell).filter((n) => !n.endsWith("_"));
    const metric = concrete(cells[3]!)[0] ?? concrete(cells[1]!)[0] ?? "nodejs_eventloop_lag_p99_seconds";
    t.ok(
      [...ruleNames].some((n) => n === metric || n === metric + "_bucket"),
      `an alert uses ${metric} (${cells[3]})`,
    );
  }
});

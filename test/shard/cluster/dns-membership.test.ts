import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { closeAgents } from "../../harness/http-client.js";
import { CLUSTER_SECRET, hit, metric, waitForRing } from "../../harness/cluster.js";
import { freePort, spawnNode, type NodeProcess } from "../../harness/node-process.js";

t.teardown(closeAgents);

const NAME = "ringlimit-peers.test";

/**
 * PEERS_DNS end to end against a real DNS server (dnsmasq) on loopback. Loopback is
 * 127.0.0.0/8, so three nodes get three addresses (127.0.0.1–3) and one peer port, as
 * pods behind a Kubernetes headless Service do.
 */
t.test("PEERS_DNS: members follow the name's A records", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "ringlimit-dns-"));
  const hosts = path.join(dir, "hosts");
  writeFileSync(hosts, `127.0.0.1 ${NAME}\n127.0.0.2 ${NAME}\n127.0.0.3 ${NAME}\n`);
  const dnsPort = await freePort();
  const dnsmasq = spawn(
    "dnsmasq",
    [
      "--keep-in-foreground",
      "--no-resolv",
      "--no-hosts",
      `--addn-hosts=${hosts}`,
      "--listen-address=127.0.0.1",
      "--bind-interfaces",
      `--port=${dnsPort}`,
      "--local-ttl=0",
      "--pid-file=" + path.join(dir, "pid"),
      "--user=root",
    ],
    { stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  let dnsLog = "";
  dnsmasq.stderr!.on("data", (d: Buffer) => (dnsLog += d.toString()));
  t.teardown(() => {
    try {
      process.kill(-dnsmasq.pid!, "SIGKILL");
    } catch {
      /* gone */
    }
  });
  await new Promise((r) => setTimeout(r, 300));
  t.equal(dnsmasq.exitCode, null, `dnsmasq running ${dnsLog}`);

  const peerPort = await freePort();
  const nodes: NodeProcess[] = [];
  t.teardown(() => Promise.all(nodes.map((n) => n.kill())));
  for (const ip of ["127.0.0.1", "127.0.0.2", "127.0.0.3"]) {
    nodes.push(
      await spawnNode({
        HOST: ip,
        PEER_HOST: ip,
        PEER_PORT: String(peerPort),
        PEERS_DNS: `${NAME}:${peerPort}`,
        DNS_SERVER: `127.0.0.1:${dnsPort}`,
        DNS_INTERVAL_MS: "200",
        CLUSTER_SECRET,
        HEARTBEAT_INTERVAL_MS: "100",
        FAILURE_TIMEOUT_MS: "600",
      }),
    );
  }
  const views = nodes;
  await waitForRing(views, 3);
  for (const v of views) t.equal(await metric(v, "ringlimit_configured_members"), 3, "three members resolved");

  const counts = [];
  for (let i = 0; i < 6; i++) counts.push((await hit(views[i % 3]!, "dns-shared", 100)).json.data.count);
  t.same(counts, [1, 2, 3, 4, 5, 6], "one counter across the DNS-discovered cluster");

  // Scale in: the third address leaves the record set; dnsmasq re-reads on SIGHUP.
  writeFileSync(hosts, `127.0.0.1 ${NAME}\n127.0.0.2 ${NAME}\n`);
  process.kill(dnsmasq.pid!, "SIGHUP");
  const deadline = Date.now() + 5000;
  while ((await metric(views[0]!, "ringlimit_configured_members")) !== 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  t.equal(await metric(views[0]!, "ringlimit_configured_members"), 2, "node 1 re-resolved: 2 members");
  await waitForRing([views[0]!, views[1]!], 2);
  t.pass("the removed address left the ring of the remaining members");

  // A failed lookup keeps the last known members.
  process.kill(-dnsmasq.pid!, "SIGKILL");
  await new Promise((r) => setTimeout(r, 800));
  t.equal(await metric(views[0]!, "ringlimit_configured_members"), 2, "DNS outage: members kept");
});

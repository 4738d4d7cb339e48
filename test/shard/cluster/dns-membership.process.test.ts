import t from "tap";
import { closeAgents } from "../../harness/http-client.js";
import { CLUSTER_SECRET, PATIENT_PEERS, hit, metric, waitForRing } from "../../harness/cluster.js";
import { startDnsServer } from "../../harness/dns-server.js";
import { spawnNode, type NodeProcess } from "../../harness/node-process.js";
import { freePort } from "../../harness/ports.js";
import { sleep } from "../../harness/wait.js";

t.teardown(closeAgents);

const NAME = "ringlimit-peers.test";

/**
 * PEERS_DNS end to end against a real DNS server (dns2, in this test process) on loopback. Loopback is
 * 127.0.0.0/8, so three nodes get three addresses (127.0.0.1–3) and one peer port, as
 * pods behind a Kubernetes headless Service do.
 */
t.test("PEERS_DNS: members follow the name's A records", async (t) => {
  const dns = await startDnsServer();
  t.teardown(() => dns.close());
  dns.setRecords(NAME, ["127.0.0.1", "127.0.0.2", "127.0.0.3"]);

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
        DNS_SERVER: dns.address,
        DNS_INTERVAL_MS: "200",
        CLUSTER_SECRET,
        // members leave by DNS here, not by the failure detector; the counts are exact
        ...PATIENT_PEERS,
      }),
    );
  }
  const views = nodes;
  await waitForRing(views, 3);
  for (const v of views) t.equal(await metric(v, "ringlimit_configured_members"), 3, "three members resolved");

  const counts = [];
  for (let i = 0; i < 6; i++) counts.push((await hit(views[i % 3]!, "dns-shared", 100)).json.data.count);
  t.same(counts, [1, 2, 3, 4, 5, 6], "one counter across the DNS-discovered cluster");

  // Scale in: the third address leaves the record set.
  dns.setRecords(NAME, ["127.0.0.1", "127.0.0.2"]);
  const deadline = Date.now() + 5000;
  while ((await metric(views[0]!, "ringlimit_configured_members")) !== 2 && Date.now() < deadline) await sleep(100);
  t.equal(await metric(views[0]!, "ringlimit_configured_members"), 2, "node 1 re-resolved: 2 members");
  await waitForRing([views[0]!, views[1]!], 2);
  t.pass("the removed address left the ring of the remaining members");

  // A failed lookup keeps the last known members.
  await dns.close();
  await sleep(800);
  t.equal(await metric(views[0]!, "ringlimit_configured_members"), 2, "DNS outage: members kept");
});

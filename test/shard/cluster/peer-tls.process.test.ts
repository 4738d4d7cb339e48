import t from "tap";
import { PeerClient } from "../../../src/peer/index.js";
import { PEER_TIMINGS } from "../../peer/helpers.js";
import { closeAgents } from "../../harness/http-client.js";
import { selfSignedCert } from "../../harness/certs.js";
import { CLUSTER_SECRET, hit, metric, startCluster } from "../../harness/cluster.js";
import { sleep } from "../../harness/wait.js";

t.teardown(closeAgents);

t.test("PEER_TLS_*: the peer channel runs over TLS between real nodes", async (t) => {
  const { certFile: cert, keyFile: key } = await selfSignedCert(t, { commonName: "127.0.0.1" });
  const cluster = await startCluster(2, { PEER_TLS_CERT_FILE: cert, PEER_TLS_KEY_FILE: key, PEER_TLS_CA_FILE: cert });
  t.teardown(() => cluster.stop());
  const [a, b] = cluster.nodes;
  const id = cluster.identifierOwnedBy(1, "tls");
  const counts = [];
  for (let i = 0; i < 4; i++) counts.push((await hit([a!, b!][i % 2]!, id, 10)).json.data.count);
  t.same(counts, [1, 2, 3, 4], "one counter across nodes over the TLS channel");
  t.equal(await metric(a!, "ringlimit_forwarded_total", '{outcome="allowed"}'), 2, "node A forwarded its two requests");

  // The port really speaks TLS: a client with the right secret but plain TCP never comes up.
  const plain = new PeerClient({
    host: "127.0.0.1",
    port: Number(cluster.env[1]!.PEER_PORT),
    secret: CLUSTER_SECRET,
    nodeId: "plain",
    serverNodeId: `127.0.0.1:${cluster.env[1]!.PEER_PORT}`,
    handshakeTimeoutMs: 500,
    reconnectMinMs: 1000,
    reconnectMaxMs: 1000,
    ...PEER_TIMINGS,
  });
  t.teardown(() => plain.close());
  plain.connect();
  await sleep(800);
  t.not(plain.state, "up", "plain TCP to the TLS peer port is not accepted");
});

/**
 * The client over HTTPS: a node with TLS advertises an https:// URL by default, and the
 * client, given the certificate as its CA, discovers it and checks through it (verified);
 * without the CA the TLS handshake fails and the client answers on its own terms.
 */
import t from "tap";
import { RingLimitClient } from "../../src/client/index.js";
import { selfSignedCert } from "../harness/certs.js";
import { clearOfWindowEnd } from "../harness/contract.js";
import { TEST_KEY } from "../harness/http-client.js";
import { startTestNode } from "../harness/in-process-node.js";

const { cert, certFile, keyFile } = await selfSignedCert(t, { commonName: "127.0.0.1", ip: "127.0.0.1" });
const node = await startTestNode({ TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile });
t.teardown(() => node.stop());

t.test("verified against the node's certificate: discovery and checks over TLS", async (t) => {
  const client = new RingLimitClient({ urls: node.url, apiKey: TEST_KEY, timeoutMs: 5000, tls: { ca: cert } });
  t.teardown(() => client.close());
  await client.ready();
  t.equal(client.stats.refreshes, 1, "GET /cluster answered over TLS");
  // 1 per hour, well inside one hour: a 60 s window could end between the two checks.
  const once = { namespace: "tls", identifier: "a", limit: 1, duration: 3600 };
  await clearOfWindowEnd(once.duration, 30_000);
  const r = await client.limit(once);
  t.match(r, { allowed: true, status: 200, source: "owner" }, "sent to the https:// URL the node advertises");
  t.equal((await client.limit(once)).status, 429);
});

t.test("an unknown certificate is refused: the client's own answer", async (t) => {
  const client = new RingLimitClient({ urls: node.url, apiKey: TEST_KEY, timeoutMs: 5000, failOpen: false });
  t.teardown(() => client.close());
  await client.ready();
  t.equal(client.stats.refreshFailures, 1);
  t.match(await client.limit({ namespace: "tls", identifier: "b", limit: 1, duration: 60 }), { allowed: false, degraded: true, status: 0, source: "client" });
  t.equal(client.stats.unavailable, 1, "the failed GET /cluster already marked the node unreachable: no wait");
});

/**
 * A check issued right after the client is created, against a real node reached first
 * through a slow link (a relay adding 200 ms each way, as a far load balancer would): it
 * waits for the first GET /cluster, then goes to its owner directly and is answered, not
 * degraded, within a timeoutMs (300 ms) shorter than the seed's round trip. With
 * discoveryWaitMs 0 it goes to the slow seed at once and comes back degraded, which is what
 * every first check did before. (300 ms, not the default 50: on two cores shared by a
 * load average of 35, a warm request to a node can take longer than 50 ms.)
 */
import t from "tap";
import { RingLimitClient } from "../../src/client/index.js";
import { TEST_KEY } from "../harness/http-client.js";
import { spawnNode } from "../harness/node-process.js";
import { startRelay } from "../harness/relay.js";

const node = await spawnNode({});
t.teardown(() => node.kill());
const relay = await startRelay(node.port);
t.teardown(() => relay.close());
relay.delayMs = { toServer: 200, toClient: 200 };
const timeoutMs = 300;
const seed = `http://127.0.0.1:${relay.port}`;

t.test("the first check waits for discovery, then goes to its owner", async (t) => {
  const client = new RingLimitClient({ urls: seed, apiKey: TEST_KEY, timeoutMs });
  t.teardown(() => client.close());
  const started = performance.now();
  const r = await client.limit({ namespace: "first", identifier: "u1", limit: 10, duration: 3600 });
  const ms = performance.now() - started;
  t.match(r, { allowed: true, degraded: false, status: 200, source: "owner" }, `answered by the node in ${ms.toFixed(0)} ms`);
  t.ok(ms >= 400, "after discovery through the slow seed (200 ms each way)");
  t.not(client.ringVersion, "", "the ring is known");
  t.equal(client.stats.timeouts, 0);
});

t.test("discoveryWaitMs 0: the first check goes to the seed at once, and cannot beat the slow link", async (t) => {
  const client = new RingLimitClient({ urls: seed, apiKey: TEST_KEY, timeoutMs, discoveryWaitMs: 0 });
  t.teardown(() => client.close());
  const r = await client.limit({ namespace: "first", identifier: "u2", limit: 10, duration: 3600 });
  t.match(r, { allowed: true, degraded: true, status: 0, source: "client" });
  t.equal(client.stats.timeouts, 1);
});

t.test("a seed that refuses the connection: checks are not held back (discovery ends at once)", async (t) => {
  const client = new RingLimitClient({ urls: ["http://127.0.0.1:1", node.url], apiKey: TEST_KEY, timeoutMs: 5000 });
  t.teardown(() => client.close());
  const r = await client.limit({ namespace: "first", identifier: "u3", limit: 10, duration: 3600 });
  t.match(r, { allowed: true, degraded: false, status: 200 });
});

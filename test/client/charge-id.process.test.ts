/**
 * The client's charge() with a chargeId, and settle(), against two real nodes (docs/client.md,
 * "Charge ids"): the owner sits behind a real HTTP proxy (its ADVERTISE_URL) that drops one
 * charge's answer after the owner counted it. With an id, the client sends it once more (to the
 * other node, which forwards it with its id) and learns it was counted: counted once. Without an
 * id it answers "unknown" and never sends it again.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import { RingLimitClient } from "../../src/client/index.js";
import { closeAgents, limit, TEST_KEY } from "../harness/http-client.js";
import { startCluster } from "../harness/cluster.js";
import { clearOfWindowEnd } from "../harness/contract.js";
import { sleep } from "../harness/wait.js";

t.teardown(closeAgents);

/** An HTTP proxy to 127.0.0.1:`target` that, while `drop` is set, reads the answer to one POST /limit/charge and closes the connection instead of passing it on. */
async function startDroppingProxy() {
  const state = { target: 0, drop: false, dropped: 0 };
  const server = http.createServer((req, res) => {
    const body: Buffer[] = [];
    req.on("data", (c: Buffer) => body.push(c));
    req.on("end", () => {
      const up = http.request({ host: "127.0.0.1", port: state.target, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        const chunks: Buffer[] = [];
        answer.on("data", (c: Buffer) => chunks.push(c));
        answer.on("end", () => {
          if (req.url === "/limit/charge" && state.drop) {
            // The owner answered (it counted the charge); the caller never hears it.
            state.drop = false;
            state.dropped++;
            req.socket.destroy();
            return;
          }
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          res.end(Buffer.concat(chunks));
        });
      });
      up.on("error", () => req.socket.destroy());
      up.end(Buffer.concat(body));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return { state, port, close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))) };
}

t.test("a charge whose answer was lost: with a chargeId retried once and counted once; without, 'unknown' and sent once", async (t) => {
  const proxy = await startDroppingProxy();
  t.teardown(() => proxy.close());
  const proxyUrl = `http://127.0.0.1:${proxy.port}`;
  // Node 0 is reached only through the proxy: GET /cluster lists it there.
  const cluster = await startCluster(2, {}, (i): Record<string, string> => (i === 0 ? { ADVERTISE_URL: proxyUrl } : {}));
  t.teardown(() => cluster.stop());
  proxy.state.target = cluster.nodes[0]!.port;
  await clearOfWindowEnd(3600, 60_000);
  const owner = cluster.nodes[0]!;
  const client = new RingLimitClient({ urls: proxyUrl, apiKey: TEST_KEY, timeoutMs: 5000, retryNodeAfterMs: 200 });
  t.teardown(() => client.close());
  await client.ready();
  const keyOf = (identifier: string) => ({ namespace: "test", identifier, limit: 1000, duration: 3600 });
  const countOf = async (key: ReturnType<typeof keyOf>) => key.limit - (await limit(owner.url, { ...key, cost: 0 })).json.data.remaining;

  const key = keyOf(cluster.identifierOwnedBy(0, "client-cid"));
  proxy.state.drop = true;
  const r = await client.charge({ ...key, cost: 30, chargeId: "client-1" });
  t.equal(proxy.state.dropped, 1, "the first answer was dropped");
  t.match(r, { counted: true, status: 200, retried: true }, "retried once with its id, and the owner said it counted it");
  t.equal(r.data?.duplicate, true, "the retry was answered as the first charge");
  t.equal(r.data?.charge_id, "client-1");
  t.equal(await countOf(key), 30, "counted once");

  // Without an id: the lost answer is "unknown", and the charge is not sent again.
  await sleep(400); // past retryNodeAfterMs: the owner is tried first again
  const plain = keyOf(cluster.identifierOwnedBy(0, "client-plain"));
  proxy.state.drop = true;
  const p = await client.charge({ ...plain, cost: 30 });
  t.equal(proxy.state.dropped, 2);
  t.match(p, { counted: "unknown", status: 0 });
  t.equal(p.retried, undefined, "never sent again");
  t.equal(await countOf(plain), 30, "counted once by the owner, unknown to the caller");

  // settle() sends its charge with an id of its own: a lost answer is retried and counted once.
  await sleep(400);
  const budget = keyOf(cluster.identifierOwnedBy(0, "client-settle"));
  const reservation = await client.reserve({ ...budget, cost: 10 });
  t.equal(reservation.allowed, true);
  await sleep(400);
  proxy.state.drop = true;
  const settled = await reservation.settle(50);
  t.equal(proxy.state.dropped, 3);
  t.match(settled, { counted: true, status: 200, retried: true });
  t.match(settled?.data?.charge_id, /^[0-9a-f-]{36}$/, "a generated id");
  t.equal(await countOf(budget), 50, "the estimate and the 40 beyond it, each counted once");
});

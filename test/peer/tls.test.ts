// The channel over TLS, with a throwaway self-signed certificate.
import t from "tap";
import { selfSignedCert } from "../harness/certs.js";
import { decideQuery, echoHandler, makeClient, PATIENT_TIMEOUT_MS, rawConnect, startServer } from "./helpers.js";
import { eventually, sleep, waitEvent, within } from "../harness/wait.js";

const { cert, key } = await selfSignedCert(t, { commonName: "localhost" });

t.test("decide and call work over TLS", async (t) => {
  const handler = { ...echoHandler(), call: async (_m: number, p: Buffer): Promise<Buffer> => p };
  const { server, port } = await startServer(handler, { tls: { cert, key } });
  // The certificate says CN=localhost, we connect to 127.0.0.1: names are not
  // checked (membership is by address), the chain is.
  const client = makeClient(port, { tls: { ca: cert }, timeoutMs: PATIENT_TIMEOUT_MS });
  t.teardown(async () => {
    client.close();
    await server.close();
  });
  client.connect();
  await waitEvent(client, "up");
  const results = await Promise.all(
    Array.from(
      { length: 100 },
      (_, i) => new Promise<number>((resolve) => client.decide(decideQuery("ns", `id-${i}`, 1, i + 1, 60), (_e, r) => resolve(r!.remaining))),
    ),
  );
  t.same(
    results,
    Array.from({ length: 100 }, (_, i) => i),
  );
  t.equal(server.stats.decideFrames, 1);
  const big = Buffer.alloc(300 * 1024, 5);
  t.ok((await client.call(1, big, 5_000)).equals(big));
});

t.test("a client that does not trust the certificate never comes up", async (t) => {
  const handler = echoHandler();
  const { server, port } = await startServer(handler, { tls: { cert, key } });
  const other = await selfSignedCert(t, { commonName: "localhost" });
  const client = makeClient(port, { tls: { ca: other.cert }, reconnectMinMs: 50, reconnectMaxMs: 100 });
  const ups: number[] = [];
  client.on("up", () => ups.push(1));
  t.teardown(async () => {
    client.close();
    await server.close();
  });
  client.connect();
  await waitEvent(client, "down");
  await sleep(200);
  t.same(ups, []);
  t.equal(handler.decided, 0);
});

t.test("a plain-TCP client cannot talk to a TLS server", async (t) => {
  const handler = echoHandler();
  const { server, port } = await startServer(handler, { tls: { cert, key }, handshakeTimeoutMs: 500 });
  t.teardown(() => server.close());
  const plain = makeClient(port, { handshakeTimeoutMs: 500, reconnectMinMs: 1_000, reconnectMaxMs: 1_000 });
  t.teardown(() => plain.close());
  plain.connect();
  await waitEvent(plain, "down", 3_000);
  t.equal(plain.state, "down");
  // And raw bytes to the TLS port are cut off.
  const { socket, closed } = await rawConnect(port);
  socket.write("hello?");
  t.ok(await within(closed, 2_000), "closed");
  t.equal(handler.decided, 0);
});

t.test("connections still in their TLS handshake count against the unauthenticated bounds", async (t) => {
  const handler = echoHandler();
  const { server, port } = await startServer(handler, { tls: { cert, key }, maxPendingHandshakes: 3 });
  t.teardown(() => server.close());
  const idle = [];
  for (let i = 0; i < 10; i++) idle.push(await rawConnect(port));
  await eventually(() => server.stats.pendingEvicted === 7, 5_000); // the server has taken in all ten
  t.equal(server.pendingHandshakes, 3, "ten idle TCP connections, three held");
  t.equal(server.stats.pendingEvicted, 7);
  const client = makeClient(port, { tls: { ca: cert } });
  t.teardown(() => client.close());
  client.connect();
  await waitEvent(client, "up");
  t.pass("a member still gets in over TLS");
  t.ok(server.pendingHandshakes <= 3);
  for (const c of idle) c.socket.destroy();
});

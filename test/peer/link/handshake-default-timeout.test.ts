// The real 2 s handshake deadline, once, in a file of its own so the rest
// of the suite can use short timeouts and stay fast.
import t from "tap";
import { HANDSHAKE_TIMEOUT_MS, PEER_DEFAULTS } from "../../../src/peer/wire/constants.js";
import { echoHandler, rawConnect, startServer } from "../helpers.js";

t.test("a silent connection is closed after the default HANDSHAKE_TIMEOUT_MS", async (t) => {
  t.equal(HANDSHAKE_TIMEOUT_MS, 2_000);
  t.equal(PEER_DEFAULTS.handshakeTimeoutMs, HANDSHAKE_TIMEOUT_MS);
  const handler = echoHandler();
  const { server, port } = await startServer(handler); // no handshakeTimeoutMs override
  t.teardown(() => server.close());
  const start = performance.now();
  const { closed } = await rawConnect(port);
  const waited = (await closed) - start;
  t.ok(waited >= HANDSHAKE_TIMEOUT_MS - 10 && waited < HANDSHAKE_TIMEOUT_MS + 1_000, `closed after ${waited.toFixed(0)} ms`);
  t.equal(server.stats.connectionsRejected, 1);
  t.equal(handler.decided, 0);
});

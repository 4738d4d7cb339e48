import t from "tap";
import { randomBytes } from "node:crypto";
import { FrameType, MAX_FRAME_BYTES } from "../../src/peer/constants.js";
import { FrameDecoder, encodeFrame } from "../../src/peer/frame.js";
import { ClientHandshake, HandshakeError, ServerHandshake, clientProof, secretKey, serverProof } from "../../src/peer/handshake.js";
import { DecideBatchWriter, decodeChallenge, encodeHello, encodeProof } from "../../src/peer/messages.js";
import { HOST, SECRET, echoHandler, makeClient, rawAuthenticatedClient, rawConnect, sleep, startServer, waitEvent, within } from "./helpers.js";

function decideFrame(): Buffer {
  const w = new DecideBatchWriter();
  w.add(1, 0, 10, 60, "ns", "id");
  return w.take()!;
}

t.test("in memory: both sides agree only with the same secret", async (t) => {
  const run = (clientSecret: string, serverSecret: string): string => {
    const c = new ClientHandshake(secretKey(clientSecret), "c");
    const s = new ServerHandshake(secretKey(serverSecret), "s");
    const toServer: Buffer[] = [c.start()];
    const toClient: Buffer[] = [];
    try {
      for (let round = 0; round < 3; round++) {
        for (const f of toServer.splice(0)) {
          new FrameDecoder((type, body) => s.receive(type, body, (x) => toClient.push(x))).push(f);
        }
        for (const f of toClient.splice(0)) {
          let done = false;
          new FrameDecoder((type, body) => (done = c.receive(type, body, (x) => toServer.push(x)))).push(f);
          if (done) return `ready ${c.remoteNodeId} ${s.remoteNodeId}`;
        }
      }
      return "stuck";
    } catch (err) {
      return (err as Error).message;
    }
  };
  t.equal(run("a", "a"), "ready s c");
  t.match(run("a", "b"), /server proof does not match/);
});

t.test("the two proofs differ, so neither can be reflected as the other", async (t) => {
  const key = secretKey(SECRET);
  const a = randomBytes(32);
  const b = randomBytes(32);
  t.notSame(serverProof(key, a, b), clientProof(key, a, b));
  t.notSame(serverProof(key, a, b), clientProof(key, b, a));
  t.throws(() => secretKey(""), TypeError);
});

t.test("right secret: client and server both reach READY", async (t) => {
  const handler = echoHandler();
  const { server, port } = await startServer(handler);
  const client = makeClient(port);
  t.teardown(async () => {
    client.close();
    await server.close();
  });
  t.equal(client.state, "connecting");
  client.connect();
  await waitEvent(client, "up");
  t.equal(client.state, "up");
  t.equal(client.remoteNodeId, "server-1");
  t.equal(server.stats.handshakesCompleted, 1);
  t.equal(server.connections, 1);
});

t.test("wrong secret on the client: never up, handler never called", async (t) => {
  const handler = echoHandler();
  const { server, port } = await startServer(handler);
  const client = makeClient(port, { secret: "not-the-secret", reconnectMinMs: 20, reconnectMaxMs: 40 });
  const ups: number[] = [];
  client.on("up", () => ups.push(1));
  t.teardown(async () => {
    client.close();
    await server.close();
  });
  client.connect();
  const reason = await waitEvent<string>(client, "down");
  t.match(reason, /protocol error: server proof does not match/);
  client.decide("ns", "id", 0, 10, 60, (err) => t.equal(err?.code, "unavailable"));
  await sleep(200); // several reconnect attempts
  t.same(ups, []);
  t.equal(handler.decided, 0);
  t.equal(server.stats.handshakesCompleted, 0);
});

t.test("wrong secret on the server: client refuses, handler never called", async (t) => {
  const handler = echoHandler();
  const { server, port } = await startServer(handler, { secret: "server-has-another" });
  const client = makeClient(port);
  t.teardown(async () => {
    client.close();
    await server.close();
  });
  client.connect();
  t.match(await waitEvent<string>(client, "down"), /server proof does not match/);
  t.equal(server.stats.handshakesCompleted, 0);
  t.equal(handler.decided, 0);
});

t.test("a bad PROOF is refused by the server", async (t) => {
  const handler = echoHandler();
  const { server, port } = await startServer(handler);
  t.teardown(() => server.close());

  // Reflection: send the server's own proof back as ours.
  const { socket, closed } = await rawConnect(port);
  const nonceC = randomBytes(32);
  const challenge = new Promise<Buffer>((resolve) => {
    const dec = new FrameDecoder((type, body) => {
      if (type === FrameType.CHALLENGE) resolve(Buffer.from(body));
    });
    socket.on("data", (c: Buffer) => dec.push(c));
  });
  socket.write(encodeHello(nonceC, "attacker"));
  const ch = decodeChallenge(await challenge);
  socket.write(encodeProof(ch.mac));
  socket.write(decideFrame());
  t.ok(await within(closed, 2_000), "closed");
  t.equal(handler.decided, 0);
  t.equal(server.stats.handshakesCompleted, 0);
  t.equal(server.connections, 0);

  // A proof made with the wrong secret.
  const second = await rawConnect(port);
  const dec2Challenge = new Promise<Buffer>((resolve) => {
    const dec = new FrameDecoder((_type, body) => resolve(Buffer.from(body)));
    second.socket.on("data", (c: Buffer) => dec.push(c));
  });
  second.socket.write(encodeHello(nonceC, "attacker"));
  const ch2 = decodeChallenge(await dec2Challenge);
  second.socket.write(encodeProof(clientProof(secretKey("guess"), nonceC, ch2.nonce)));
  t.ok(await within(second.closed, 2_000), "closed");
  t.equal(handler.decided, 0);
});

t.test("garbage and out-of-order frames before READY close the connection", async (t) => {
  const handler = echoHandler();
  const { server, port } = await startServer(handler);
  t.teardown(() => server.close());
  const cases: Array<[string, Buffer[]]> = [
    ["HTTP request", [Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n")]],
    ["random bytes", [randomBytes(64)]],
    ["DECIDE first", [decideFrame()]],
    ["PING first", [encodeFrame(FrameType.PING, Buffer.alloc(8))]],
    ["READY from a client", [encodeFrame(FrameType.READY)]],
    ["PROOF first", [encodeProof(randomBytes(32))]],
    ["HELLO then DECIDE", [encodeHello(randomBytes(32), "x"), decideFrame()]],
    ["HELLO twice", [encodeHello(randomBytes(32), "x"), encodeHello(randomBytes(32), "x")]],
    ["malformed HELLO", [encodeFrame(FrameType.HELLO, Buffer.alloc(10))]],
    ["handshake frame over 4 KiB", [encodeFrame(FrameType.HELLO, Buffer.alloc(5000))]],
  ];
  for (const [name, writes] of cases) {
    const { socket, closed } = await rawConnect(port);
    for (const w of writes) socket.write(w);
    t.ok(await within(closed, 2_000), `${name}: closed`);
  }
  t.equal(handler.decided, 0, "handler never called");
  t.equal(server.stats.handshakesCompleted, 0);
  t.equal(server.stats.framesReceived, 0);
  t.equal(server.stats.connectionsRejected, cases.length);
});

t.test("silence before the handshake: closed after handshakeTimeoutMs", async (t) => {
  const { server, port } = await startServer(echoHandler(), { handshakeTimeoutMs: 300 });
  t.teardown(() => server.close());
  const start = performance.now();
  const { closed } = await rawConnect(port);
  const at = await closed;
  const waited = at - start;
  t.ok(waited >= 290 && waited < 1_000, `closed after ${waited.toFixed(0)} ms`);

  // A half-finished handshake (HELLO, then nothing) is timed out too.
  const second = await rawConnect(port);
  second.socket.write(encodeHello(randomBytes(32), "slow"));
  t.ok(await within(second.closed, 1_000), "HELLO-only connection closed");
  t.equal(server.connections, 0);
});

t.test("after READY: an oversized frame closes the connection at once", async (t) => {
  const handler = echoHandler();
  const { server, port } = await startServer(handler);
  t.teardown(() => server.close());
  const { socket, closed } = await rawAuthenticatedClient(port);
  const header = Buffer.alloc(5);
  header.writeUInt32BE(MAX_FRAME_BYTES + 1);
  header[4] = FrameType.DECIDE;
  socket.write(header); // no body follows: the length alone is enough
  t.ok(await within(closed, 1_000), "closed");
  t.equal(handler.decided, 0);
});

t.test("after READY: a frame the server does not accept, or a bad body, closes", async (t) => {
  const handler = echoHandler();
  const { server, port } = await startServer(handler);
  t.teardown(() => server.close());
  const bad: Array<[string, Buffer]> = [
    ["DECIDE_REPLY to a server", encodeFrame(FrameType.DECIDE_REPLY, Buffer.from([0, 0, 0, 0]))],
    ["second HELLO", encodeHello(randomBytes(32), "again")],
    ["truncated DECIDE body", encodeFrame(FrameType.DECIDE, decideFrame().subarray(5, 20))],
    [
      "DECIDE with a trailing byte",
      (() => {
        const f = decideFrame();
        const g = Buffer.concat([f, Buffer.from([0])]);
        g.writeUInt32BE(f.readUInt32BE(0) + 1, 0);
        return g;
      })(),
    ],
    ["PING of 7 bytes", encodeFrame(FrameType.PING, Buffer.alloc(7))],
  ];
  for (const [name, frame] of bad) {
    const { socket, closed } = await rawAuthenticatedClient(port);
    socket.write(frame);
    t.ok(await within(closed, 1_000), `${name}: closed`);
  }
  t.equal(handler.decided, 0);
});

t.test("after READY: a silent connection is closed after idleTimeoutMs, a pinging one is not", async (t) => {
  const { server, port } = await startServer(echoHandler(), { idleTimeoutMs: 300 });
  t.teardown(() => server.close());
  const silent = await rawAuthenticatedClient(port);
  const start = performance.now();
  const client = makeClient(port, { heartbeatIntervalMs: 50 });
  t.teardown(() => client.close());
  client.connect();
  await waitEvent(client, "up");
  const at = await silent.closed;
  t.ok(at - start >= 250 && at - start < 1_000, `silent one closed after ${(at - start).toFixed(0)} ms`);
  await sleep(400);
  t.equal(client.state, "up", "pinging client still up");
  t.equal(server.connections, 1);
  t.ok(client.rttMs >= 0 && client.rttMs < 100, `rtt ${client.rttMs.toFixed(3)} ms`);
});

t.test("the server refuses connections beyond maxPendingHandshakes", async (t) => {
  const { server, port } = await startServer(echoHandler(), { maxPendingHandshakes: 2 });
  t.teardown(() => server.close());
  const a = await rawConnect(port);
  const b = await rawConnect(port);
  const c = await rawConnect(port);
  t.ok(await within(c.closed, 1_000), "third closed");
  t.equal(server.connections, 2);
  a.socket.destroy();
  b.socket.destroy();
  await Promise.all([a.closed, b.closed]);
  await sleep(50); // let the server see both closes
  // Freed slots are usable again.
  const client = makeClient(port);
  t.teardown(() => client.close());
  client.connect();
  await waitEvent(client, "up");
  t.pass("a real client still gets in");
});

t.test("HandshakeError is what a client sees for an unexpected frame", async (t) => {
  const c = new ClientHandshake(secretKey(SECRET), "c");
  c.start();
  t.throws(() => c.receive(FrameType.READY, Buffer.alloc(0), () => {}), HandshakeError);
  t.equal(HOST, "127.0.0.1");
});

import t from "tap";
import { randomBytes } from "node:crypto";
import { FrameType, MAX_FRAME_BYTES } from "../../../src/peer/wire/constants.js";
import { FrameDecoder, encodeFrame, encodeHandshakeFrame } from "../../../src/peer/wire/frame.js";
import { ClientHandshake, HandshakeError, ServerHandshake, deriveSecrets, readyFrame, secretKey } from "../../../src/peer/link/handshake.js";
import { DecideBatchWriter, decodeChallenge, encodeHello, encodeProof } from "../../../src/peer/wire/messages.js";
import { HOST, SECRET, decideQuery, echoHandler, makeClient, rawAuthenticatedClient, rawConnect, startServer } from "../helpers.js";
import { eventually, sleep, waitEvent, within } from "../../harness/wait.js";

function decideFrame(): Buffer {
  const w = new DecideBatchWriter();
  w.add(1, 0, 10, 60, "ns", "id");
  return w.take()!;
}

t.test("in memory: both sides agree only with the same secret and the same server id", async (t) => {
  const run = (clientSecret: string, serverSecret: string, dialed = "s"): string => {
    const c = new ClientHandshake(secretKey(clientSecret), "c", dialed);
    const s = new ServerHandshake(secretKey(serverSecret), "s");
    const toServer: Buffer[] = [c.start()];
    const toClient: Buffer[] = [];
    const serverDecoder = new FrameDecoder((type, body) => {
      if (s.receive(type, body, (x) => toClient.push(x))) toClient.push(s.session!.sealer.seal(readyFrame()));
    });
    let done = false;
    const clientDecoder: FrameDecoder = new FrameDecoder((type, body) => {
      done = c.receive(type, body, (x) => toServer.push(x));
      if (c.session !== null) clientDecoder.opener = c.session.opener;
    });
    try {
      for (let round = 0; round < 3; round++) {
        for (const f of toServer.splice(0)) serverDecoder.push(f);
        for (const f of toClient.splice(0)) {
          clientDecoder.push(f);
          if (done) return `ready ${c.serverNodeId} ${s.remoteNodeId}`;
        }
      }
      return "stuck";
    } catch (err) {
      return (err as Error).message;
    }
  };
  t.equal(run("a", "a"), "ready s c");
  t.match(run("a", "b"), /server proof does not match/);
  t.match(run("a", "a", "t"), /client dialed node "t", this is "s"/);
});

t.test("proofs and keys are bound to both ids, both nonces and the direction", async (t) => {
  const key = secretKey(SECRET);
  const a = randomBytes(32);
  const b = randomBytes(32);
  const base = deriveSecrets(key, "c", "s", a, b);
  const all = (x: ReturnType<typeof deriveSecrets>): string[] => [
    x.serverProof.toString("hex"),
    x.clientProof.toString("hex"),
    x.clientToServer.export().toString("hex"),
    x.serverToClient.export().toString("hex"),
  ];
  const mine = all(base);
  t.equal(new Set(mine).size, 4, "the four outputs differ from each other");
  for (const [name, other] of [
    ["roles swapped", deriveSecrets(key, "s", "c", a, b)],
    ["other server id", deriveSecrets(key, "c", "t", a, b)],
    ["other client id", deriveSecrets(key, "d", "s", a, b)],
    ["nonces swapped", deriveSecrets(key, "c", "s", b, a)],
    ["other nonce", deriveSecrets(key, "c", "s", a, randomBytes(32))],
    ["other secret", deriveSecrets(secretKey("other"), "c", "s", a, b)],
  ] as const) {
    const theirs = all(other);
    t.same(
      mine.filter((x) => theirs.includes(x)),
      [],
      `${name}: nothing in common`,
    );
  }
  t.throws(() => deriveSecrets(key, "cs", "", a, b), "an empty node id is refused (so ids cannot shift across their boundary)");
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
  client.decide(decideQuery("ns", "id", 0, 10, 60), (err) => t.equal(err?.code, "unavailable"));
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
  socket.write(encodeHello(nonceC, "attacker", "server-1"));
  const ch = decodeChallenge(await challenge);
  socket.write(encodeProof(ch.proof));
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
  second.socket.write(encodeHello(nonceC, "attacker", "server-1"));
  const ch2 = decodeChallenge(await dec2Challenge);
  second.socket.write(encodeProof(deriveSecrets(secretKey("guess"), "attacker", "server-1", nonceC, ch2.nonce).clientProof));
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
    ["HELLO then DECIDE", [encodeHello(randomBytes(32), "x", "server-1"), decideFrame()]],
    ["HELLO twice", [encodeHello(randomBytes(32), "x", "server-1"), encodeHello(randomBytes(32), "x", "server-1")]],
    ["HELLO for another node", [encodeHello(randomBytes(32), "x", "server-2")]],
    ["HELLO claiming the server's own id", [encodeHello(randomBytes(32), "server-1", "server-1")]],
    ["malformed HELLO", [encodeHandshakeFrame(FrameType.HELLO, Buffer.alloc(10))]],
    ["handshake frame over 4 KiB", [encodeHandshakeFrame(FrameType.HELLO, Buffer.alloc(5000))]],
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
  second.socket.write(encodeHello(randomBytes(32), "slow", "server-1"));
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
    ["second HELLO", encodeFrame(FrameType.HELLO, encodeHello(randomBytes(32), "again", "server-1").subarray(5))],
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
    const { send, closed } = await rawAuthenticatedClient(port);
    send(frame);
    t.ok(await within(closed, 1_000), `${name}: closed`);
  }
  t.equal(handler.decided, 0);
  t.equal(server.stats.framesRefused, 0, "each was refused for its content: its tag was right");
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
  // Measured, and in ms: within the client's own life (not a speed claim, which a loaded machine breaks).
  t.ok(client.rttMs >= 0 && client.rttMs < performance.now() - start, `rtt ${client.rttMs.toFixed(3)} ms`);
});

t.test("beyond maxPendingHandshakes the oldest unauthenticated connection goes, silent ones first", async (t) => {
  const { server, port } = await startServer(echoHandler(), { maxPendingHandshakes: 2 });
  t.teardown(() => server.close());
  const talker = await rawConnect(port);
  talker.socket.write(encodeHello(randomBytes(32), "talker", "server-1"));
  await sleep(50);
  const silent = await rawConnect(port);
  const third = await rawConnect(port);
  t.ok(await within(silent.closed, 1_000), "the silent one is closed, though the talker is older");
  t.notOk(await within(talker.closed, 100), "the one mid-handshake stays");
  const fourth = await rawConnect(port);
  t.ok(await within(third.closed, 1_000), "then the oldest silent one again");
  t.equal(server.pendingHandshakes, 2);
  // A real client always gets in: it evicts the oldest, and completes in one round trip.
  const client = makeClient(port);
  t.teardown(() => client.close());
  client.connect();
  await waitEvent(client, "up");
  t.pass("a real client gets in with the slots full");
  t.ok(server.stats.pendingEvicted >= 3);
  t.ok(server.refusals.total("evicted") >= 3, "evictions are counted for the summary log");
  talker.socket.destroy();
  fourth.socket.destroy();
});

t.test("the per-source bound evicts only that source's connections", async (t) => {
  const { server, port } = await startServer(echoHandler(), { maxPendingPerSource: 3 });
  t.teardown(() => server.close());
  const conns = [];
  for (let i = 0; i < 10; i++) conns.push(await rawConnect(port));
  await eventually(() => server.stats.pendingEvicted === 7, 5_000); // the server has taken in all ten
  t.equal(server.pendingHandshakes, 3, "one source holds at most 3");
  for (const c of conns) c.socket.destroy();
});

t.test("HandshakeError is what a client sees for an unexpected frame", async (t) => {
  const c = new ClientHandshake(secretKey(SECRET), "c", "s");
  c.start();
  t.throws(() => c.receive(FrameType.READY, Buffer.alloc(0), () => {}), HandshakeError);
  t.equal(HOST, "127.0.0.1");
});

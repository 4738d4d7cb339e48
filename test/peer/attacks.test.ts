// The attacks of issue 10 on the peer channel, each over real sockets with a
// man in the middle (test/harness/relay.ts) or a hand-driven end. Before the
// per-frame tags and the bound handshake, every one of these got a frame
// decided; now each is refused and the counts stay exact.

import t from "tap";
import { randomBytes } from "node:crypto";
import { DecideCode, FrameType } from "../../src/peer/wire/constants.js";
import { FrameDecoder } from "../../src/peer/wire/frame.js";
import { type DecideQuery, type DecideResult, type PeerError, type PeerServerHandler } from "../../src/peer/index.js";
import { DecideBatchWriter, decodeHello, encodeHello } from "../../src/peer/wire/messages.js";
import { startRelay, type Direction } from "../harness/relay.js";
import { decideQuery, frameType, makeClient, rawAuthenticatedClient, rawConnect, relayedPair, startServer } from "./helpers.js";
import { waitEvent, within } from "../harness/wait.js";

/** A real counter per identifier: allowed while the count is within the limit. */
function countingHandler(): PeerServerHandler & { counts: Map<string, number> } {
  const counts = new Map<string, number>();
  return {
    counts,
    decide({ identifier: id, limit }: DecideQuery, out: DecideResult): void {
      const n = (counts.get(id) ?? 0) + 1;
      counts.set(id, n);
      out.code = n <= limit ? DecideCode.ALLOWED : DecideCode.BLOCKED;
      out.remaining = Math.max(0, limit - n);
      out.resetTime = 1_700_000_000;
      out.retryAfterMs = 0;
    },
  };
}

type Answer = { err: string | null; code: number | null };
function ask(client: ReturnType<typeof makeClient>, id: string, limit = 1000): Promise<Answer> {
  return new Promise((resolve) =>
    client.decide(decideQuery("ns", id, 0, limit, 60), (err: PeerError | null, r: DecideResult | null) =>
      resolve({ err: err?.code ?? null, code: r?.code ?? null }),
    ),
  );
}

/** Clients here ping rarely, so that the frames a test counts are its own. */
const QUIET = { heartbeatIntervalMs: 60_000, failureTimeoutMs: 60_000, timeoutMs: 1_000, reconnectMinMs: 20, reconnectMaxMs: 50 };

function decideFrame(id: string): Buffer {
  const w = new DecideBatchWriter();
  w.add(0, 0, 1000, 60, "ns", id);
  return w.take()!;
}

t.test("relay: a HELLO meant for one node, relayed to another, is refused before any proof", async (t) => {
  const handler = countingHandler();
  // The real node B ("server-1"). The attacker listens where member "server-2" used to be.
  const { server, port } = await startServer(handler);
  const proxy = await startRelay(port);
  const client = makeClient(proxy.port, { ...QUIET, serverNodeId: "server-2" });
  t.teardown(async () => {
    client.close();
    await proxy.close();
    await server.close();
  });
  const downs: string[] = [];
  client.on("down", (r) => downs.push(r));
  const refused = waitEvent(client, "down");
  client.connect();
  await refused; // its first attempt ended (the server counts a refusal before it closes)
  t.not(client.state, "up", "the client never comes up");
  t.equal(server.stats.handshakesCompleted, 0);
  t.ok(server.refusals.total("wrong_node") >= 1, "refused as a HELLO for another node");
  t.equal(handler.counts.size, 0, "nothing decided");
});

t.test("relay that rewrites the HELLO's target: the proofs no longer match, both sides refuse", async (t) => {
  const handler = countingHandler();
  const { server, port } = await startServer(handler);
  let challenges = 0;
  const proxy = await startRelay(port, {
    hook: (frame, n, dir) => {
      if (dir === "toServer" && n === 0) {
        // The attacker readdresses the HELLO to the node it reaches.
        const hello = decodeHello(frame.subarray(5));
        return [encodeHello(hello.nonce, hello.clientNodeId, "server-1")];
      }
      if (dir === "toClient" && frameType(frame) === FrameType.CHALLENGE) challenges++;
      return [frame];
    },
  });
  const client = makeClient(proxy.port, { ...QUIET, serverNodeId: "server-2" });
  t.teardown(async () => {
    client.close();
    await proxy.close();
    await server.close();
  });
  const down = waitEvent<string>(client, "down");
  client.connect();
  t.match(await down, /server proof does not match the cluster secret and node "server-2"/);
  t.ok(challenges >= 1, "the node did answer the rewritten HELLO");
  t.equal(server.stats.handshakesCompleted, 0);
  t.equal(handler.counts.size, 0);
});

t.test("reflection: a node's own handshake turned back on its own server never authenticates", async (t) => {
  // Node A: its server (id "node-a") and its client, which dials member "node-b" at
  // an address the attacker holds and relays to A's own server.
  const handler = countingHandler();
  const { server, port } = await startServer(handler, { nodeId: "node-a" });
  const variants: Array<[string, (hello: ReturnType<typeof decodeHello>) => Buffer]> = [
    ["as sent", (h) => encodeHello(h.nonce, h.clientNodeId, h.serverNodeId)],
    ["target rewritten to node-a", (h) => encodeHello(h.nonce, h.clientNodeId, "node-a")],
    ["both ids rewritten", (h) => encodeHello(h.nonce, "node-x", "node-a")],
  ];
  t.teardown(() => server.close());
  for (const [name, rewrite] of variants) {
    const proxy = await startRelay(port, { hook: (frame, n, dir) => (dir === "toServer" && n === 0 ? [rewrite(decodeHello(frame.subarray(5)))] : [frame]) });
    const client = makeClient(proxy.port, { ...QUIET, nodeId: "node-a", serverNodeId: "node-b" });
    const refused = waitEvent(client, "down");
    client.connect();
    await refused;
    t.not(client.state, "up", `${name}: A's client never comes up`);
    client.close();
    await proxy.close();
  }
  t.equal(server.stats.handshakesCompleted, 0, "A's server never authenticated anyone");
  t.ok(server.refusals.total("wrong_node") >= 1, "as sent: HELLO for node-b refused");
  t.ok(server.refusals.total("reflected") >= 1, "claiming A's own id: refused");
  t.equal(handler.counts.size, 0);

  // The same with a hand-driven reflecting client: the server's proof sent back as PROOF.
  const { socket, closed } = await rawConnect(port);
  const challenge = new Promise<Buffer>((resolve) => {
    const dec = new FrameDecoder((type, body) => type === FrameType.CHALLENGE && resolve(Buffer.from(body)));
    socket.on("data", (c: Buffer) => dec.push(c));
  });
  socket.write(encodeHello(randomBytes(32), "node-b", "node-a"));
  const proof = (await challenge).subarray(32);
  socket.write(Buffer.concat([Buffer.from([0, 0, 0, 33, FrameType.PROOF]), proof]));
  t.ok(await within(closed, 2_000), "reflected proof: closed");
  t.ok(server.refusals.total("bad_proof") >= 1);
  t.equal(server.stats.handshakesCompleted, 0);
});

t.test("wrong identity: a client that dials member X and reaches a node with another id refuses", async (t) => {
  const handler = countingHandler();
  const { server, port } = await startServer(handler, { nodeId: "127.0.0.1:7003" });
  const client = makeClient(port, { ...QUIET, serverNodeId: "127.0.0.1:7002" });
  t.teardown(async () => {
    client.close();
    await server.close();
  });
  const refused = waitEvent(client, "down");
  client.connect();
  await refused;
  t.not(client.state, "up");
  t.equal(client.remoteNodeId, null);
  t.equal(server.stats.handshakesCompleted, 0);
  // And with the right name it works.
  const right = makeClient(port, { ...QUIET, serverNodeId: "127.0.0.1:7003" });
  t.teardown(() => right.close());
  right.connect();
  await waitEvent(right, "up");
  t.equal(right.remoteNodeId, "127.0.0.1:7003");
});

t.test("bit flipping: an altered frame is refused, the connection dropped, counts intact", async (t) => {
  let decides = 0;
  const flipped: Direction[] = [];
  const { handler, server, client, relay } = await relayedPair(t, countingHandler(), QUIET, (frame, _n, dir, conn) => {
    if (conn.index === 0 && dir === "toServer" && frameType(frame) === FrameType.DECIDE && ++decides === 3) {
      const bad = Buffer.from(frame);
      // One bit of the item's limit (the u32 after count, reqId and algorithm): 2 becomes 262,146.
      bad[5 + 4 + 4 + 1 + 1]! ^= 0x04;
      flipped.push(dir);
      return [bad];
    }
    return [frame];
  });
  t.same(await ask(client, "victim", 2), { err: null, code: DecideCode.ALLOWED });
  t.same(await ask(client, "victim", 2), { err: null, code: DecideCode.ALLOWED });
  const third = await ask(client, "victim", 2);
  t.same(flipped, ["toServer"]);
  t.equal(third.err, "unavailable", "the altered frame's request fails (the caller fails open), it is not decided");
  t.equal(server.stats.framesRefused, 1);
  t.equal(handler.counts.get("victim"), 2, "the altered frame was not counted");
  await waitEvent(client, "up"); // reconnects: a new session through the same relay
  t.equal(relay.accepted, 2);
  t.same(await ask(client, "victim", 2), { err: null, code: DecideCode.BLOCKED }, "the third counted request is blocked, as it must be");
  t.equal(handler.counts.get("victim"), 3);

  // Every single-bit change of a reply frame is refused by the client too.
  let replies = 0;
  const second = await relayedPair(t, countingHandler(), QUIET, (frame, _n, dir) => {
    if (dir === "toClient" && frameType(frame) === FrameType.DECIDE_REPLY && ++replies === 1) {
      const bad = Buffer.from(frame);
      bad[bad.length - 20]! ^= 0x01; // in retryAfterMs
      return [bad];
    }
    return [frame];
  });
  const down = waitEvent<string>(second.client, "down");
  t.equal((await ask(second.client, "k")).err, "unavailable");
  t.match(await down, /frame authentication failed/);
});

t.test("replay: a frame sent again, on the same or on another connection, is refused", async (t) => {
  let recorded: Buffer | null = null;
  let replay: (() => void) | null = null;
  const { handler, server, client } = await relayedPair(t, countingHandler(), QUIET, (frame, _n, dir, conn) => {
    if (dir === "toServer" && frameType(frame) === FrameType.DECIDE && recorded === null) {
      recorded = frame;
      replay = () => conn.inject("toServer", frame);
    }
    return [frame];
  });
  const first = await ask(client, "replayed");
  t.equal(first.err, null, "the original is decided");
  const down = waitEvent<string>(client, "down");
  replay!();
  await down;
  t.equal(server.stats.framesRefused, 1, "the copy is refused");
  t.equal(handler.counts.get("replayed"), 1, "counted once");

  // Replayed into another authenticated connection (its keys differ).
  const other = await rawAuthenticatedClient(server.port);
  other.socket.write(recorded!);
  t.ok(await within(other.closed, 2_000), "closed");
  t.equal(server.stats.framesRefused, 2);
  t.equal(handler.counts.get("replayed"), 1);

  // Reordered: two sealed frames sent in swapped order.
  const third = await rawAuthenticatedClient(server.port);
  const a = third.sealer.seal(decideFrame("reordered-a"));
  const b = third.sealer.seal(decideFrame("reordered-b"));
  third.socket.write(Buffer.concat([b, a]));
  t.ok(await within(third.closed, 2_000), "closed");
  t.equal(handler.counts.get("reordered-a"), undefined);
  t.equal(handler.counts.get("reordered-b"), undefined);
});

t.test("injection: a frame added to an authenticated stream is refused", async (t) => {
  let injected = false;
  const { handler, server, client } = await relayedPair(t, countingHandler(), QUIET, (frame, _n, dir, conn) => {
    if (dir === "toServer" && frameType(frame) === FrameType.DECIDE && !injected) {
      injected = true;
      // Forged by someone without the keys: a well-formed DECIDE with a made-up tag, ahead of the real one.
      const forged = decideFrame("injected");
      randomBytes(16).copy(forged, forged.length - 16);
      conn.inject("toServer", forged);
    }
    return [frame];
  });
  const answer = await ask(client, "honest");
  t.equal(answer.err, "unavailable", "the connection was closed at the forged frame, before the honest one behind it");
  t.equal(server.stats.framesRefused, 1);
  t.equal(handler.counts.get("injected"), undefined, "the injected request was never decided");
  t.equal(handler.counts.get("honest"), undefined);
  await waitEvent(client, "up");
  t.same(await ask(client, "honest"), { err: null, code: DecideCode.ALLOWED }, "the next session works");
});

t.test("a DECIDE frame over the caps is refused at once, before anything is decided", async (t) => {
  const handler = countingHandler();
  const { server, port } = await startServer(handler);
  t.teardown(() => server.close());
  // 1 MiB announced: refused on its header, before the body is buffered.
  const big = await rawAuthenticatedClient(port);
  const header = Buffer.alloc(5);
  header.writeUInt32BE(1024 * 1024, 0);
  header[4] = FrameType.DECIDE;
  big.socket.write(header);
  t.ok(await within(big.closed, 1_000), "closed");
  // Not judged by the clock (a loaded machine makes any bound flaky): the refusal's reason
  // says it came from the header's length, not from a timeout waiting for the body.
  t.equal(server.refusals.total("bad_frame"), 1, "refused as a bad frame, on its header");

  // 513 items (one over MAX_DECIDE_ITEMS) in one properly sealed frame: refused whole.
  const many = await rawAuthenticatedClient(port);
  const items: Buffer[] = [];
  for (let i = 0; i < 513; i++) {
    const item = Buffer.alloc(17 + 2 + 4);
    item.writeUInt32BE(i, 0);
    item.writeUInt32BE(1000, 5);
    item.writeUInt32BE(60, 9);
    item.writeUInt16BE(2, 13);
    item.writeUInt16BE(4, 15);
    item.write("ns", 17);
    item.write(String(i).padStart(4, "0"), 19);
    items.push(item);
  }
  const count = Buffer.alloc(4);
  count.writeUInt32BE(513, 0);
  const body = Buffer.concat([count, ...items]);
  const frame = Buffer.alloc(5 + body.length + 16);
  frame.writeUInt32BE(1 + body.length + 16, 0);
  frame[4] = FrameType.DECIDE;
  body.copy(frame, 5);
  many.send(frame);
  t.ok(await within(many.closed, 1_000), "closed");
  t.equal(handler.counts.size, 0, "none of its items was decided");
  t.equal(server.stats.framesRefused, 0, "refused for its size, its tag was right");
});

import net from "node:net";
import { createHmac, randomBytes } from "node:crypto";
import t from "tap";
import { PROTOCOL_VERSION } from "../../../src/peer/wire/constants.js";
import { PeerClient } from "../../../src/peer/index.js";
import { PEER_TIMINGS, decideQuery } from "../../peer/helpers.js";
import { closeAgents } from "../../harness/http-client.js";
import { hit, startCluster } from "../../harness/cluster.js";
import { sleep } from "../../harness/wait.js";

t.teardown(closeAgents);

/** A DECIDE frame built by hand from the wire format, for a key that then must not be counted. */
function forgedDecide(ns: string, id: string): Buffer {
  const nsBytes = Buffer.from(ns);
  const idBytes = Buffer.from(id);
  const body = Buffer.alloc(4 + 17 + nsBytes.length + idBytes.length);
  let o = body.writeUInt32BE(1, 0);
  o = body.writeUInt32BE(1, o);
  o = body.writeUInt8(0, o);
  o = body.writeUInt32BE(100, o);
  o = body.writeUInt32BE(3600, o);
  o = body.writeUInt16BE(nsBytes.length, o);
  o = body.writeUInt16BE(idBytes.length, o);
  nsBytes.copy(body, o);
  idBytes.copy(body, o + nsBytes.length);
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(1 + body.length, 0);
  frame.writeUInt8(7, 4);
  body.copy(frame, 5);
  return frame;
}

const u16 = (n: number): Buffer => Buffer.from([n >> 8, n & 0xff]);
const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n, 0);
  return b;
};

/** Connect, send `bytes`, resolve with how long until the server closed the socket. */
function closedAfter(port: number, bytes: Buffer | undefined, limitMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(port, "127.0.0.1", () => {
      if (bytes !== undefined) socket.write(bytes);
    });
    socket.on("data", () => {});
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(Date.now() - started);
    });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`still open after ${limitMs} ms`));
    }, limitMs);
  });
}

t.test("the peer port acts only on authenticated connections", async (t) => {
  const cluster = await startCluster(2);
  t.teardown(() => cluster.stop());
  const node = cluster.nodes[0]!;
  const peerPort = Number(cluster.env[0]!.PEER_PORT);
  // The key must be owned by node 0 so that a later HTTP request to node 0 shows its count.
  const id = cluster.identifierOwnedBy(0, "forged");

  await t.test("garbage bytes: closed", async (t) => {
    t.ok((await closedAfter(peerPort, randomBytes(4096), 3000)) < 3000);
  });

  await t.test("a DECIDE frame before any handshake: closed, nothing counted", async (t) => {
    t.ok((await closedAfter(peerPort, Buffer.concat([forgedDecide("test", id), forgedDecide("test", id)]), 3000)) < 3000);
  });

  await t.test("an oversized frame length: closed", async (t) => {
    const header = Buffer.alloc(5);
    header.writeUInt32BE(64 * 1024 * 1024, 0);
    header.writeUInt8(7, 4);
    t.ok((await closedAfter(peerPort, header, 3000)) < 3000);
  });

  await t.test("a HELLO then a forged PROOF (wrong secret): closed, nothing counted", async (t) => {
    const socket = net.connect(peerPort, "127.0.0.1");
    const closed = new Promise<void>((r) => socket.on("close", () => r()));
    socket.on("error", () => {});
    const nonce = randomBytes(32);
    const nodeId = Buffer.from("intruder");
    const target = Buffer.from(`127.0.0.1:${peerPort}`);
    // HELLO: the protocol version, nonce, u16 + client id, u16 + the id of the node dialed.
    const body = Buffer.concat([Buffer.from([PROTOCOL_VERSION]), nonce, u16(nodeId.length), nodeId, u16(target.length), target]);
    const hello = Buffer.concat([u32(1 + body.length), Buffer.from([1]), body]);
    socket.write(hello);
    const challenged = new Promise<void>((r) => socket.once("data", () => r()));
    socket.once("data", () => {
      const mac = createHmac("sha256", "not-the-secret").update("whatever").digest();
      const proof = Buffer.alloc(5 + 32);
      proof.writeUInt32BE(33, 0);
      proof.writeUInt8(3, 4);
      mac.copy(proof, 5);
      socket.write(Buffer.concat([proof, forgedDecide("test", id)]));
    });
    await challenged;
    t.pass("the node answered the HELLO with a CHALLENGE (it was addressed to it)");
    await closed;
    t.pass("closed");
  });

  await t.test("a real client with the wrong secret never gets a decision", async (t) => {
    const client = new PeerClient({
      host: "127.0.0.1",
      port: peerPort,
      secret: "wrong-secret-wrong-secret",
      nodeId: "intruder",
      serverNodeId: `127.0.0.1:${peerPort}`,
      reconnectMinMs: 1000,
      reconnectMaxMs: 1000,
      ...PEER_TIMINGS,
    });
    t.teardown(() => client.close());
    client.connect();
    await sleep(500);
    t.not(client.state, "up");
    const answer = await new Promise<string>((resolve) => client.decide(decideQuery("test", id, 0, 100, 3600), (err) => resolve(err?.code ?? "answered")));
    t.equal(answer, "unavailable");
  });

  await t.test("silence: closed after the 2 s handshake limit", async (t) => {
    const ms = await closedAfter(peerPort, undefined, 6_000);
    t.ok(ms >= 1_900 && ms < 6_000, `closed after ${ms} ms`);
  });

  await t.test("nothing above was counted and the node still serves", async (t) => {
    const r = await hit(node, id, 100);
    t.equal(r.status, 200);
    t.equal(r.json.data.count, 1, "the forged decisions never reached the state table");
  });
});

/**
 * Peer protocol ranges (docs/peer-protocol.md, "Versions"): which version two ranges share, the
 * HELLO versions a server answers, and over real sockets the version a link runs at, including
 * with a server of 11 built before ranges (it answers the range call with an error) and with a
 * peer that shares no version (it never counts as up).
 */
import t from "tap";
import { randomBytes } from "node:crypto";
import net from "node:net";
import { CallStatus, FEATURE_VERSIONS, FrameType, PROTOCOL_MIN, PROTOCOL_VERSION } from "../../../src/peer/wire/constants.js";
import { decodeRange, encodeRange, ownRange, sharedVersion, supportsAt } from "../../../src/peer/link/versions.js";
import { HandshakeError, ServerHandshake, readyFrame, secretKey } from "../../../src/peer/link/handshake.js";
import { decodeCall, decodePing, encodeCallReply, encodeHello, encodePong } from "../../../src/peer/wire/messages.js";
import { FrameError } from "../../../src/peer/errors.js";
import { FrameDecoder } from "../../../src/peer/wire/frame.js";
import { SECRET, echoHandler, makeClient, startServer } from "../helpers.js";
import { waitEvent } from "../../harness/wait.js";

t.test("two ranges share their highest common version, or none", async (t) => {
  t.equal(sharedVersion({ min: 11, max: 12 }, { min: 11, max: 11 }), 11, "a node of 11 and one of 11..12 run at 11");
  t.equal(sharedVersion({ min: 11, max: 12 }, { min: 11, max: 13 }), 12);
  t.equal(sharedVersion({ min: 11, max: 12 }, { min: 12, max: 14 }), 12);
  t.equal(sharedVersion({ min: 11, max: 12 }, { min: 13, max: 14 }), undefined, "13..14 and 11..12 share nothing");
  t.equal(sharedVersion({ min: 11, max: 11 }, { min: 10, max: 10 }), undefined);
  t.same(ownRange(), { min: PROTOCOL_MIN, max: PROTOCOL_VERSION });
  t.same(ownRange(PROTOCOL_MIN), { min: PROTOCOL_MIN, max: PROTOCOL_MIN }, "PEER_PROTOCOL_MAX holds the top");
  t.throws(() => ownRange(PROTOCOL_VERSION + 1), RangeError, "not above what the build speaks");
  t.throws(() => ownRange(PROTOCOL_MIN - 1), RangeError);
  t.throws(() => decodeRange(Buffer.from([12, 11])), FrameError, "min above max");
  t.throws(() => decodeRange(Buffer.from([0, 11])), FrameError);
  t.same(decodeRange(encodeRange({ min: 11, max: 12 }, "0123456789abcdef")), { min: 11, max: 12, membersTag: "0123456789abcdef" }, "a members tag rides along");
  t.same(decodeRange(encodeRange({ min: 11, max: 12 })), { min: 11, max: 12, membersTag: "" }, "none with PEERS_DNS");
  t.throws(() => decodeRange(Buffer.from([11, 12, 2, 0x41])), FrameError, "a tag shorter than its length");
  t.throws(() => decodeRange(Buffer.from([11, 12, 1, 0x0a])), FrameError, "a tag with a control character");
  t.throws(() => decodeRange(Buffer.concat([Buffer.from([11, 12, 65]), Buffer.alloc(65, 0x41)])), FrameError, "a tag over 64 bytes");
  t.ok(supportsAt(11, "OPENING") && !supportsAt(11, "RANGES") && supportsAt(12, "RANGES"), "features by version");
  t.ok(!supportsAt(12, "CHARGE_ID") && supportsAt(13, "CHARGE_ID"), "a charge id from 13");
  for (const [feature, v] of Object.entries(FEATURE_VERSIONS)) t.ok(v <= PROTOCOL_VERSION, `${feature} is of a version this build speaks`);
});

t.test("a server answers a HELLO of any version from PROTOCOL_MIN up, and refuses an older one by name", async (t) => {
  const answer = (version: number): string => {
    const s = new ServerHandshake(secretKey(SECRET), "s");
    let out = "nothing";
    new FrameDecoder((type, body) => {
      try {
        s.receive(type, body, () => (out = "challenge"));
      } catch (err) {
        out = err instanceof HandshakeError ? `refused ${err.reason}` : (err as Error).message;
      }
    }).push(encodeHello(randomBytes(32), "c", "s", version));
    return out;
  };
  t.equal(answer(PROTOCOL_MIN), "challenge");
  t.equal(answer(PROTOCOL_MIN + 5), "challenge", "a newer node's HELLO: the ranges decide after the handshake");
  t.equal(answer(10), "refused protocol_10", "a node of 10 is refused, the reason naming its version (the refusal summary's key)");
});

t.test("over a real connection, a link runs at the highest version both ends speak", async (t) => {
  for (const [server, client, expect] of [
    [ownRange(), ownRange(), PROTOCOL_VERSION],
    [ownRange(PROTOCOL_MIN), ownRange(), PROTOCOL_MIN],
    [ownRange(), ownRange(PROTOCOL_MIN), PROTOCOL_MIN],
  ] as const) {
    const { server: s, port } = await startServer(echoHandler(), { protocol: server });
    const c = makeClient(port, { protocol: client });
    c.connect();
    await waitEvent(c, "up");
    t.equal(c.link.version, expect, `server ${server.min}..${server.max}, client ${client.min}..${client.max}: ${expect}`);
    t.same(c.link.remote, server, "the client learned the server's range");
    t.equal(c.link.supports("RANGES"), expect >= FEATURE_VERSIONS.RANGES);
    c.close();
    await s.close();
  }
});

t.test("a server of 11 built before ranges answers the range call with an error: the link runs at 11", async (t) => {
  const legacy = await startLegacyServer();
  t.teardown(() => legacy.close());
  const c = makeClient(legacy.port);
  t.teardown(() => c.close());
  c.connect();
  await waitEvent(c, "up");
  t.equal(c.link.version, PROTOCOL_MIN);
  t.same(c.link.remote, { min: 11, max: 11 });
  t.notOk(c.link.supports("RANGES"));
});

/**
 * What a node of 11 built before ranges does on its peer port, as 3ff6668's code does it: the
 * handshake (a HELLO of 11 only), then a CALL of a method it does not know answered with an
 * error, and PINGs answered. (test/shard/cluster/rolling-upgrade.process.test.ts runs the real
 * build when RINGLIMIT_OLD_MAIN names one.)
 */
async function startLegacyServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    const hs = new ServerHandshake(secretKey(SECRET), "server-1");
    let ready = false;
    const dec = new FrameDecoder((type, body) => {
      if (!ready) {
        if (type === FrameType.HELLO && body[0] !== 11) throw new Error("a node of 11 refuses any other HELLO");
        ready = hs.receive(type, body, (f) => socket.write(f));
        if (ready) {
          dec.opener = hs.session!.opener;
          socket.write(hs.session!.sealer.seal(readyFrame()));
        }
        return;
      }
      const seal = (f: Buffer) => socket.write(hs.session!.sealer.seal(f));
      if (type === FrameType.CALL) {
        const call = decodeCall(body);
        seal(encodeCallReply(call.callId, CallStatus.ERROR, Buffer.from(`unknown call method ${call.method}`)));
      }
      if (type === FrameType.PING) seal(encodePong(decodePing(body), Date.now(), ""));
    });
    socket.on("data", (c: Buffer) => {
      try {
        dec.push(c);
      } catch {
        socket.destroy();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

t.test("a peer that shares no version never counts as up, and says why", async (t) => {
  // A range wholly above this build's, whatever its top: a future peer past a breaking change.
  const above = { min: PROTOCOL_VERSION + 1, max: PROTOCOL_VERSION + 2 };
  const { server, port } = await startServer(echoHandler(), { protocol: above });
  t.teardown(() => server.close());
  const c = makeClient(port, { protocol: ownRange() });
  t.teardown(() => c.close());
  let up = false;
  c.on("up", () => (up = true));
  c.connect();
  const reason = await waitEvent<string>(c, "down");
  t.notOk(up, "never up");
  t.ok(c.link.apart, "the link knows it shares no version");
  t.same(c.link.remote, above);
  t.match(String(reason), `no shared protocol version: the peer speaks ${above.min}..${above.max}, this node ${PROTOCOL_MIN}..${PROTOCOL_VERSION}`);
});

// Shared pieces of the peer channel tests: real sockets on 127.0.0.1, ports
// chosen by the OS, and hand-driven ends of the protocol for the cases a
// well-behaved PeerServer or PeerClient would never produce.

import { randomBytes } from "node:crypto";
import net from "node:net";
import { CallStatus, FrameType, PROTOCOL_CALL } from "../../src/peer/wire/constants.js";
import { encodeRange, ownRange } from "../../src/peer/link/versions.js";
import { FrameDecoder, encodeFrame } from "../../src/peer/wire/frame.js";
import { ClientHandshake, ServerHandshake, readyFrame, secretKey } from "../../src/peer/link/handshake.js";
import type { FrameSealer } from "../../src/peer/link/session.js";
import { decodeCall, decodePing, encodeCallReply, encodePing } from "../../src/peer/wire/messages.js";
import {
  PeerClient,
  PeerServer,
  type DecideQuery,
  type DecideResult,
  type PeerClientOptions,
  type PeerServerHandler,
  type PeerServerOptions,
} from "../../src/peer/index.js";
import { startRelay, type FrameHook, type Relay } from "../harness/relay.js";
import { DEFAULTS } from "../../src/config.js";
// Only the type: the harness starts processes, and unit tests import this file
// (test/unit-split.test.ts keeps them free of node:child_process).
import type { TestCluster } from "../harness/cluster.js";
import { waitEvent } from "../harness/wait.js";

export const HOST = "127.0.0.1";
export const SECRET = randomBytes(32).toString("base64url");
/** The service's defaults of the peer settings (src/config.ts), for clients and servers built directly. */
export const PEER_TIMINGS = Object.freeze({
  timeoutMs: DEFAULTS.peerTimeoutMs,
  heartbeatIntervalMs: DEFAULTS.heartbeatIntervalMs,
  failureTimeoutMs: DEFAULTS.failureTimeoutMs,
});

/** A DecideQuery from its fields (`code`: the algorithm's code on the wire). */
export function decideQuery(namespace: string, identifier: string, code: number, limit: number, duration: number, cost = 1): DecideQuery {
  return { namespace, identifier, algorithm: { code }, limit, duration, cost };
}

/** A handler that echoes: allowed, remaining = limit - 1, and counts its calls. */
export function echoHandler(): PeerServerHandler & { decided: number } {
  const h = {
    decided: 0,
    decide({ limit, duration }: DecideQuery, out: DecideResult): void {
      h.decided++;
      out.code = 0;
      out.remaining = limit - 1;
      out.resetTime = 1_700_000_000 + duration;
      out.retryAfterMs = 0;
    },
  };
  return h;
}

export async function startServer(handler: PeerServerHandler, opts: Partial<PeerServerOptions> = {}): Promise<{ server: PeerServer; port: number }> {
  const server = new PeerServer({ host: HOST, port: 0, secret: SECRET, nodeId: "server-1", handler, ...PEER_TIMINGS, ...opts });
  const port = await server.listen();
  return { server, port };
}

/**
 * A decide() deadline for tests whose answers must arrive: the product's 100 ms is a deadline
 * a loaded machine misses (answers of 104-185 ms were seen in a full parallel run). Only the
 * tests about deadlines and timeouts set a short one.
 */
export const PATIENT_TIMEOUT_MS = 5_000;

/**
 * A PeerClient holding the secret member `index` of a real cluster runs with, connected ('up')
 * to it as `nodeId`, closed when the test ends: a forger, or a caller of CALLs by hand.
 */
export async function memberClient(t: { teardown(fn: () => void): void }, cluster: TestCluster, index: number, nodeId: string): Promise<PeerClient> {
  const env = cluster.env[index]!;
  const client = new PeerClient({
    host: env.PEER_HOST!,
    port: Number(env.PEER_PORT),
    secret: env.CLUSTER_SECRET!,
    nodeId,
    serverNodeId: cluster.members[index]!,
    ...PEER_TIMINGS,
  });
  t.teardown(() => client.close());
  client.connect();
  await waitEvent(client, "up");
  return client;
}

export function makeClient(port: number, opts: Partial<PeerClientOptions> = {}): PeerClient {
  return new PeerClient({ host: HOST, port, secret: SECRET, nodeId: "client-1", serverNodeId: "server-1", ...PEER_TIMINGS, ...opts });
}

/**
 * A real PeerServer with `handler` and a client connected to it ('up', with a patient
 * decide() deadline unless `clientOpts` sets one), both closed when the test ends.
 */
export async function connectedPair(
  t: { teardown(fn: () => Promise<void>): void },
  handler: PeerServerHandler,
  clientOpts: Partial<PeerClientOptions> = {},
): Promise<{ server: PeerServer; port: number; client: PeerClient }> {
  const { server, port } = await startServer(handler);
  const client = makeClient(port, { timeoutMs: PATIENT_TIMEOUT_MS, ...clientOpts });
  t.teardown(async () => {
    client.close();
    await server.close();
  });
  client.connect();
  await waitEvent(client, "up");
  return { server, port, client };
}

/**
 * A real PeerServer with `handler`, a relay in front of it (a slow link and/or a man in the
 * middle with `hook`, test/harness/relay.ts) and a client through the relay ('up'), all
 * closed when the test ends.
 */
export async function relayedPair<H extends PeerServerHandler>(
  t: { teardown(fn: () => Promise<void>): void },
  handler: H,
  clientOpts: Partial<PeerClientOptions> = {},
  hook?: FrameHook,
): Promise<{ handler: H; server: PeerServer; relay: Relay; client: PeerClient }> {
  const { server, port } = await startServer(handler);
  const relay = await startRelay(port, { hook });
  const client = makeClient(relay.port, clientOpts);
  t.teardown(async () => {
    client.close();
    await relay.close();
    await server.close();
  });
  client.connect();
  await waitEvent(client, "up");
  return { handler, server, relay, client };
}

/** A raw socket to `port` and a promise of its 'close', with when it happened. */
export async function rawConnect(port: number): Promise<{ socket: net.Socket; closed: Promise<number> }> {
  const socket = net.connect({ host: HOST, port });
  socket.on("error", () => {});
  // Flowing from the start: a paused socket with unread data never sees the
  // server's FIN, so 'close' would never come. Tests that read attach 'data'
  // before they write anything.
  socket.resume();
  const closed = new Promise<number>((r) => socket.once("close", () => r(performance.now())));
  await new Promise<void>((r, j) => {
    socket.once("connect", r);
    socket.once("error", j);
  });
  return { socket, closed };
}

/**
 * A hand-driven client: completes the real handshake with `secret`, then
 * lets the test write anything: `send` seals frames (made with encodeFrame or
 * the message encoders) as the next in sequence, `socket.write` sends raw
 * bytes. `frames` records what the server sent after READY (tags checked).
 */
export async function rawAuthenticatedClient(
  port: number,
  secret = SECRET,
  serverNodeId = "server-1",
): Promise<{
  socket: net.Socket;
  closed: Promise<number>;
  frames: Array<{ type: number; body: Buffer }>;
  sealer: FrameSealer;
  send(frames: Buffer): Buffer;
}> {
  const { socket, closed } = await rawConnect(port);
  const hs = new ClientHandshake(secretKey(secret), "raw-client", serverNodeId);
  const frames: Array<{ type: number; body: Buffer }> = [];
  let ready = false;
  const readyP = new Promise<void>((resolve, reject) => {
    const dec = new FrameDecoder((type, body) => {
      if (ready) frames.push({ type, body: Buffer.from(body) });
      else if (hs.receive(type, body, (f) => socket.write(f))) {
        ready = true;
        resolve();
      } else if (hs.session !== null) dec.opener = hs.session.opener;
    });
    socket.on("data", (c: Buffer) => {
      try {
        dec.push(c);
      } catch {
        socket.destroy();
      }
    });
    closed.then(() => reject(new Error("closed during handshake")));
  });
  socket.write(hs.start());
  await readyP;
  const sealer = hs.session!.sealer;
  const send = (f: Buffer): Buffer => {
    const sealed = sealer.seal(Buffer.from(f));
    socket.write(sealed);
    return sealed;
  };
  return { socket, closed, frames, sealer, send };
}

/**
 * A hand-driven server: completes the real handshake, then never answers a
 * DECIDE or CALL, and answers PINGs only while `answerPings` is true. It
 * stands for a peer that is stuck, or SIGSTOPped, with its TCP connection open.
 */
export async function startStuckServer(
  secret = SECRET,
  nodeId = "server-1",
): Promise<{
  port: number;
  answerPings: boolean;
  decideFrames: number;
  sockets: Set<net.Socket>;
  dropConnections(): void;
  close(): Promise<void>;
}> {
  const sockets = new Set<net.Socket>();
  const key = secretKey(secret);
  const state = {
    port: 0,
    answerPings: false,
    decideFrames: 0,
    sockets,
    dropConnections(): void {
      for (const s of sockets) s.destroy();
    },
    close(): Promise<void> {
      state.dropConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    const hs = new ServerHandshake(key, nodeId);
    let ready = false;
    const dec = new FrameDecoder((type, body) => {
      if (!ready) {
        ready = hs.receive(type, body, (f) => socket.write(f));
        if (ready) {
          dec.opener = hs.session!.opener;
          socket.write(hs.session!.sealer.seal(readyFrame()));
        }
        return;
      }
      // The link's own first exchange is answered (docs/peer-protocol.md, "Versions"); nothing after it.
      if (type === FrameType.CALL && decodeCall(body).method === PROTOCOL_CALL) {
        socket.write(hs.session!.sealer.seal(encodeCallReply(decodeCall(body).callId, CallStatus.OK, encodeRange(ownRange()))));
      }
      if (type === FrameType.DECIDE) state.decideFrames++;
      if (type === FrameType.PING && state.answerPings) socket.write(hs.session!.sealer.seal(encodePing(FrameType.PONG, decodePing(body))));
    });
    socket.on("data", (c: Buffer) => {
      try {
        dec.push(c);
      } catch {
        socket.destroy();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, HOST, r));
  state.port = (server.address() as net.AddressInfo).port;
  return state;
}

export { encodeFrame };

/** A peer frame's type byte (after its u32 length). */
export const frameType = (frame: Buffer): number => frame[4]!;

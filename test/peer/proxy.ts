// A man in the middle made of real sockets: listens on its own port, opens a
// connection to a target for every client it accepts, and passes whole peer
// frames each way through a hook that may forward, drop, alter, duplicate,
// reorder or add frames. It knows only the framing (u32 length + bytes), as
// an attacker reading the source would.

import net from "node:net";
import { HOST } from "./helpers.js";

export type Direction = "toServer" | "toClient";

/** Decide what to forward for one whole frame (header included); `n` counts frames per direction and connection from 0. */
export type FrameHook = (frame: Buffer, n: number, dir: Direction, conn: ProxiedConnection) => Buffer[];

export interface ProxiedConnection {
  /** index of the accepted connection, from 0 */
  index: number;
  /** write raw bytes on one side, bypassing the hook */
  inject(dir: Direction, bytes: Buffer): void;
}

export interface Proxy {
  port: number;
  /** connections accepted so far */
  accepted: number;
  /** change where new connections go */
  target: number;
  close(): Promise<void>;
}

const forward: FrameHook = (frame) => [frame];

/** `listenPort`: a fixed port to take (a stopped member's), or 0 for any. */
export async function startProxy(targetPort: number, hook: FrameHook = forward, listenPort = 0): Promise<Proxy> {
  const sockets = new Set<net.Socket>();
  const proxy: Proxy = {
    port: 0,
    accepted: 0,
    target: targetPort,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: HOST, port: proxy.target });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    const conn: ProxiedConnection = {
      index: proxy.accepted++,
      inject: (dir, bytes) => (dir === "toServer" ? upstream : client).write(bytes),
    };
    pipeFrames(client, upstream, "toServer", conn, hook);
    pipeFrames(upstream, client, "toClient", conn, hook);
  });
  await new Promise<void>((r, j) => {
    server.once("error", j);
    server.listen(listenPort, HOST, r);
  });
  proxy.port = (server.address() as net.AddressInfo).port;
  return proxy;
}

function pipeFrames(from: net.Socket, to: net.Socket, dir: Direction, conn: ProxiedConnection, hook: FrameHook): void {
  let acc = Buffer.alloc(0);
  let n = 0;
  // Bytes written before the far side connects are queued by the socket.
  from.on("data", (chunk: Buffer) => {
    acc = Buffer.concat([acc, chunk]);
    while (acc.length >= 4 && acc.length >= 4 + acc.readUInt32BE(0)) {
      const end = 4 + acc.readUInt32BE(0);
      const frame = Buffer.from(acc.subarray(0, end));
      acc = acc.subarray(end);
      for (const out of hook(frame, n++, dir, conn)) to.write(out);
    }
  });
}

/** The frame's type byte. */
export const frameType = (frame: Buffer): number => frame[4]!;

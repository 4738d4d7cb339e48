// A TCP relay made of real sockets, between a client and a target on 127.0.0.1: listens on
// its own port and opens a connection to the target for every client it accepts. Two ways
// to stand in the middle, alone or together:
//  - a slow link: every chunk is held for a delay that can be changed while connections are
//    open (bytes keep their order). No root needed, unlike the fault suite's NFQUEUE delayer;
//    it cannot lose a segment, only delay.
//  - a man in the middle: whole frames (u32 length + bytes, the peer channel's framing, as an
//    attacker reading the source would know it) pass through a hook that may forward, drop,
//    alter, duplicate, reorder or add frames.

import net from "node:net";

export type Direction = "toServer" | "toClient";

/** Decide what to forward for one whole frame (header included); `n` counts frames per direction and connection from 0. */
export type FrameHook = (frame: Buffer, n: number, dir: Direction, conn: RelayedConnection) => Buffer[];

export interface RelayedConnection {
  /** index of the accepted connection, from 0 */
  index: number;
  /** write raw bytes on one side, bypassing the hook and the delay */
  inject(dir: Direction, bytes: Buffer): void;
}

export interface Relay {
  port: number;
  /** connections accepted so far */
  accepted: number;
  /** change where new connections go */
  target: number;
  /** ms each chunk is held, per direction; changeable at any time (0: written at once) */
  delayMs: Record<Direction, number>;
  close(): Promise<void>;
}

export interface RelayOptions {
  /** pass whole frames through this hook (default: pass bytes as they come, unframed) */
  hook?: FrameHook;
  /** a fixed port to take (a stopped member's), or 0 for any (the default) */
  listenPort?: number;
}

const HOST = "127.0.0.1";

/** Relay 127.0.0.1:`listenPort` to 127.0.0.1:`targetPort`. */
export async function startRelay(targetPort: number, options: RelayOptions = {}): Promise<Relay> {
  const sockets = new Set<net.Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const relay: Relay = {
    port: 0,
    accepted: 0,
    target: targetPort,
    delayMs: { toServer: 0, toClient: 0 },
    close: () =>
      new Promise<void>((r) => {
        for (const timer of timers) clearTimeout(timer);
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
  /** Write `to` after the direction's delay, never before a chunk sent earlier. */
  const delayedWriter = (to: net.Socket, dir: Direction) => {
    let last = 0; // when the previous chunk leaves: a shorter delay must not overtake it
    let pending = 0;
    return (bytes: Buffer) => {
      const delay = relay.delayMs[dir];
      if (delay === 0 && pending === 0) {
        to.write(bytes);
        return;
      }
      const at = Math.max(Date.now() + delay, last);
      last = at;
      pending++;
      const timer = setTimeout(() => {
        timers.delete(timer);
        pending--;
        if (!to.destroyed) to.write(bytes);
      }, at - Date.now());
      timers.add(timer);
    };
  };
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: HOST, port: relay.target });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    const conn: RelayedConnection = {
      index: relay.accepted++,
      inject: (dir, bytes) => (dir === "toServer" ? upstream : client).write(bytes),
    };
    // Bytes written before the far side connects are queued by the socket.
    for (const [from, to, dir] of [[client, upstream, "toServer"] as const, [upstream, client, "toClient"] as const]) {
      const send = delayedWriter(to, dir);
      if (options.hook === undefined) from.on("data", send);
      else pipeFrames(from, dir, conn, options.hook, send);
    }
  });
  await new Promise<void>((r, j) => {
    server.once("error", j);
    server.listen(options.listenPort ?? 0, HOST, r);
  });
  relay.port = (server.address() as net.AddressInfo).port;
  return relay;
}

function pipeFrames(from: net.Socket, dir: Direction, conn: RelayedConnection, hook: FrameHook, send: (bytes: Buffer) => void): void {
  let acc = Buffer.alloc(0);
  let n = 0;
  from.on("data", (chunk: Buffer) => {
    acc = Buffer.concat([acc, chunk]);
    while (acc.length >= 4 && acc.length >= 4 + acc.readUInt32BE(0)) {
      const end = 4 + acc.readUInt32BE(0);
      const frame = Buffer.from(acc.subarray(0, end));
      acc = acc.subarray(end);
      for (const out of hook(frame, n++, dir, conn)) send(out);
    }
  });
}

// A slow link made of real sockets: a TCP relay that holds every chunk it passes for a
// delay that can be changed while connections are open (bytes keep their order). No root
// needed, unlike the fault suite's NFQUEUE delayer; it cannot lose a segment, only delay.

import net from "node:net";

export interface DelayRelay {
  port: number;
  /** ms each chunk is held, per direction (client → target, target → client); changeable at any time */
  delayMs: { toTarget: number; toClient: number };
  close(): Promise<void>;
}

/** Relay 127.0.0.1:`listenPort` (0: any free port) to 127.0.0.1:`targetPort`. */
export async function startDelayRelay(targetPort: number, listenPort = 0): Promise<DelayRelay> {
  const sockets = new Set<net.Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const relay: DelayRelay = {
    port: 0,
    delayMs: { toTarget: 0, toClient: 0 },
    close: () =>
      new Promise<void>((r) => {
        for (const timer of timers) clearTimeout(timer);
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
  const pipe = (from: net.Socket, to: net.Socket, delay: () => number) => {
    let last = 0; // when the previous chunk leaves: a shorter delay must not overtake it
    from.on("data", (chunk: Buffer) => {
      const at = Math.max(Date.now() + delay(), last);
      last = at;
      const timer = setTimeout(() => {
        timers.delete(timer);
        if (!to.destroyed) to.write(chunk);
      }, at - Date.now());
      timers.add(timer);
    });
  };
  const server = net.createServer((client) => {
    const target = net.connect({ host: "127.0.0.1", port: targetPort });
    for (const s of [client, target]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => {
        sockets.delete(s);
        client.destroy();
        target.destroy();
      });
    }
    pipe(client, target, () => relay.delayMs.toTarget);
    pipe(target, client, () => relay.delayMs.toClient);
  });
  await new Promise<void>((r, j) => {
    server.once("error", j);
    server.listen(listenPort, "127.0.0.1", r);
  });
  relay.port = (server.address() as net.AddressInfo).port;
  return relay;
}

import net from "node:net";
import type { TemplatedApp, us_listen_socket } from "uWebSockets.js";
import { us_socket_local_port } from "./uws.js";

/**
 * uWS's listen without options sets SO_REUSEPORT: a second process on the same port then
 * binds too and the kernel splits connections between the two (seen here: two nodes on one
 * PORT, both "listening"). Exclusive makes a taken port fail, as operators expect. The
 * option exists at run time but not in the typings' (host, port, options, cb) form, and
 * the exported ListenOptions enum is missing at run time, hence the literal.
 */
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;

type ListenWithOptions = (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => TemplatedApp;

/** A listener that could not bind, with the reason the operating system gives. */
export class ListenError extends Error {
  constructor(
    readonly listener: "http" | "metrics",
    readonly host: string,
    readonly port: number,
    readonly code: string,
  ) {
    super(`cannot listen on ${host}:${port}: ${describeListenError(code)}`);
    this.name = "ListenError";
  }
}

/** Listen exclusively on host:port; resolves with the bound port, rejects with a ListenError. */
export function listenExclusive(app: TemplatedApp, listener: ListenError["listener"], host: string, port: number): Promise<[us_listen_socket, number]> {
  return new Promise((resolve, reject) => {
    (app.listen as unknown as ListenWithOptions).call(app, host, port, LIBUS_LISTEN_EXCLUSIVE_PORT, (socket) => {
      if (socket) return resolve([socket, us_socket_local_port(socket as unknown as Parameters<typeof us_socket_local_port>[0])]);
      // uWS reports only "false": ask the OS why with a throwaway bind of the same address.
      void bindError(host, port).then((code) => reject(new ListenError(listener, host, port, code)));
    });
  });
}

function bindError(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "UNKNOWN"));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve("UNKNOWN")));
  });
}

/** Why a bind failed, in words an operator can act on, from the errno code. */
export function describeListenError(code: string): string {
  switch (code) {
    case "EADDRINUSE":
      return "the port is already in use by another process (EADDRINUSE)";
    case "EACCES":
      return "permission denied: ports below 1024 need privileges (EACCES)";
    case "EADDRNOTAVAIL":
      return "the address is not one of this machine's (EADDRNOTAVAIL)";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `the host name does not resolve (${code})`;
    default:
      return `the operating system refused (${code})`;
  }
}

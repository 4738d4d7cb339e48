import dgram from "node:dgram";
import { readFileSync } from "node:fs";
import net from "node:net";

/*
 * Ports for the listeners tests start, handed out so that no two test processes get the same
 * one: tap runs test files side by side, and other suites may run on the same machine.
 *
 * Why not listen(0) and close: the kernel gives that freed port to the next process asking
 * for any port, a parallel test file among them, before our node binds it (a clean `npm test`
 * failed so: `PEER_PORT: cannot listen on 127.0.0.1:46591 … EADDRINUSE`).
 *
 * Instead, (1) ports come from below the kernel's ephemeral range (ip_local_port_range), which
 * listen(0) and outgoing connections never use, so only explicit binds meet them there; and
 * (2) each port is claimed by binding a UDP socket of the same number on 127.0.0.1, held by
 * this process until it exits. UDP and TCP numbers are separate spaces, so the claim does not
 * stop our node binding TCP; but a second claim of the number fails in the kernel, whatever
 * process makes it. The kernel is the lock: atomic, and released when the process dies, however
 * it dies (no lock files to go stale). (3) A TCP probe then checks that nothing else listens
 * there (a program that binds fixed ports without claiming them).
 */

const LOWEST = 10_000;
const claims = new Map<number, dgram.Socket>();

/** [first, last] ports this harness hands out: below the ephemeral range. */
function span(): [number, number] {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    if (Number.isInteger(low) && low - LOWEST >= 4096) return [LOWEST, low - 1];
  } catch {
    /* not Linux: the usual default below */
  }
  return [LOWEST, 32_767];
}

const [FIRST, LAST] = span();
const SIZE = LAST - FIRST + 1;
// Each process starts at its own place in the span, so claims seldom meet at all.
// TEST_PORTS_START pins the start, for the test that makes processes meet on purpose.
const pinned = Number(process.env.TEST_PORTS_START);
let cursor = Number.isInteger(pinned) && pinned >= 0 ? pinned % SIZE : (process.pid * 7919) % SIZE;

/** The first of the next `n` consecutive candidates, taken at once so that calls in flight together in this process try disjoint blocks. */
function nextCandidates(n: number): number {
  if (cursor + n > SIZE) cursor = 0;
  const first = FIRST + cursor;
  cursor = (cursor + n) % SIZE;
  return first;
}

function claimUdp(port: number): Promise<dgram.Socket | undefined> {
  return new Promise((resolve) => {
    const socket = dgram.createSocket({ type: "udp4", reuseAddr: false });
    socket.once("error", () => {
      try {
        socket.close();
      } catch {
        /* never bound: nothing to close */
      }
      resolve(undefined);
    });
    socket.bind(port, "127.0.0.1", () => {
      socket.removeAllListeners("error");
      socket.unref();
      resolve(socket);
    });
  });
}

function tcpFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => server.close(() => resolve(true)));
  });
}

async function claim(port: number): Promise<boolean> {
  if (claims.has(port)) return false;
  const socket = await claimUdp(port);
  if (socket === undefined) return false;
  if (!(await tcpFree(port))) {
    socket.close();
    return false;
  }
  claims.set(port, socket);
  return true;
}

/**
 * A port on 127.0.0.1 that no other caller of freePort (in this process or any other) gets
 * while this process lives, and that nothing listened on when it was handed out.
 */
export async function freePort(): Promise<number> {
  for (let tried = 0; tried < SIZE; tried++) {
    const port = nextCandidates(1);
    if (await claim(port)) return port;
  }
  throw new Error(`no free port left in ${FIRST}-${LAST}`);
}

/** The first of `n` consecutive ports, each claimed as freePort claims one (for tools that take a base port). */
export async function freePortRange(n: number): Promise<number> {
  for (let tried = 0; tried < SIZE; tried += n) {
    const first = nextCandidates(n);
    const got: number[] = [];
    while (got.length < n && (await claim(first + got.length))) got.push(first + got.length);
    if (got.length === n) return first;
    for (const port of got) release(port);
  }
  throw new Error(`no ${n} consecutive free ports left in ${FIRST}-${LAST}`);
}

/** Gives a claimed port back (a range that could not be completed). */
function release(port: number): void {
  claims.get(port)?.close();
  claims.delete(port);
}

/**
 * HTTP/1.1 over a raw TCP socket, for what a well-behaved client never sends: pipelined
 * requests, oversized or split request heads, duplicate headers. Writes exactly the given
 * bytes (optionally in parts with pauses between them), reads until the server closes the
 * connection, the expected number of responses arrived, or a quiet period passes.
 */
import net from "node:net";
import { TEST_KEY } from "./http-client.js";
import { sleep } from "./wait.js";

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface RawExchange {
  responses: RawResponse[];
  /** bytes after the last complete response */
  rest: string;
  /** the server closed the connection (FIN or reset) before the client did */
  closedByServer: boolean;
}

export interface RawOptions {
  /** stop once this many responses arrived (default: wait for close or quiet) */
  responses?: number;
  /** give up after this long without the server closing (default 1500 ms) */
  waitMs?: number;
  /** pause between parts, when `data` is an array (default 50 ms) */
  gapMs?: number;
}

export function rawExchange(port: number, data: string | Buffer | (string | Buffer)[], options: RawOptions = {}): Promise<RawExchange> {
  const parts = Array.isArray(data) ? data : [data];
  return readExchange(port, options.waitMs, ({ socket, responseCount, finish }) => ({
    received: () => {
      if (options.responses !== undefined && responseCount() >= options.responses) finish(false);
    },
    connected: async () => {
      for (let i = 0; i < parts.length; i++) {
        if (i > 0) await sleep(options.gapMs ?? 50);
        if (socket.destroyed) return;
        socket.write(parts[i]!);
      }
    },
  }));
}

/** What a caller of `readExchange` can see and do on its connection. */
interface Reading {
  socket: net.Socket;
  /** complete responses received so far */
  responseCount(): number;
  /** stop reading, close the connection and resolve */
  finish(closedByServer: boolean): void;
}

/**
 * The reading half both exchanges share: connects to 127.0.0.1:`port`, collects every byte
 * the server sends, and resolves with the parsed responses when `finish` is called, the
 * server closes (FIN or reset), or `waitMs` (default 1500) passes. `drive` says what to
 * write once connected and after each chunk received.
 */
function readExchange(
  port: number,
  waitMs: number | undefined,
  drive: (reading: Reading) => { connected(): void; received(): void; onChunk?(chunk: Buffer): void },
): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.setNoDelay(true);
    let received = Buffer.alloc(0);
    let settled = false;
    const finish = (closedByServer: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...parseResponses(received), closedByServer });
    };
    const timer = setTimeout(() => finish(false), waitMs ?? 1500);
    const driver = drive({ socket, responseCount: () => parseResponses(received).responses.length, finish });
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      driver.onChunk?.(chunk);
      driver.received();
    });
    socket.on("close", () => finish(true));
    socket.on("error", (err: NodeJS.ErrnoException) => {
      // A reset after the server closed is a close; anything before connecting is a failure.
      if (err.code === "ECONNRESET" || err.code === "EPIPE") finish(true);
      else if (!settled) {
        settled = true;
        clearTimeout(timer);
        reject(err);
      }
    });
    socket.on("connect", () => driver.connected());
  });
}

/**
 * Pipelined bursts on one connection: each burst (several requests in one write) is written
 * once every answer to the bursts before it has arrived. Answers are counted as they come
 * (framed by Content-Length), so thousands of them cost one parse at the end. Stops at the
 * first close or after `waitMs` (default 20 s).
 */
export function rawBursts(port: number, bursts: readonly (string | Buffer)[], perBurst: number, options: { waitMs?: number } = {}): Promise<RawExchange> {
  let counted = 0;
  let scanned = 0;
  let sent = 0;
  let chunks: Buffer[] = [];
  let all = Buffer.alloc(0);
  return readExchange(port, options.waitMs ?? 20_000, ({ socket, finish }) => {
    const next = () => {
      if (sent === bursts.length) return finish(false);
      socket.write(bursts[sent++]!);
    };
    return {
      connected: next,
      received: () => {
        // readExchange keeps every byte for the final parse; this count only paces the writes.
        all = Buffer.concat([all, ...chunks]);
        chunks = [];
        for (;;) {
          const headEnd = all.indexOf("\r\n\r\n", scanned);
          if (headEnd < 0) break;
          const length = Number(/content-length: *(\d+)/i.exec(all.subarray(scanned, headEnd).toString("latin1"))?.[1] ?? 0);
          if (all.length < headEnd + 4 + length) break;
          scanned = headEnd + 4 + length;
          counted++;
        }
        if (counted === sent * perBurst) next();
      },
      onChunk: (chunk: Buffer) => chunks.push(chunk),
    };
  });
}

/** Split a byte stream into HTTP/1.1 responses framed by Content-Length. */
export function parseResponses(bytes: Buffer): { responses: RawResponse[]; rest: string } {
  const responses: RawResponse[] = [];
  let at = 0;
  for (;;) {
    const headEnd = bytes.indexOf("\r\n\r\n", at);
    if (headEnd < 0) break;
    const lines = bytes.subarray(at, headEnd).toString("latin1").split("\r\n");
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(lines[0]!)?.[1] ?? NaN);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers["content-length"] ?? 0);
    if (bytes.length < headEnd + 4 + length) break;
    responses.push({ status, headers, body: bytes.subarray(headEnd + 4, headEnd + 4 + length).toString("utf8") });
    at = headEnd + 4 + length;
  }
  return { responses, rest: bytes.subarray(at).toString("latin1") };
}

/** The bytes of one POST /limit with a JSON body and the test key. */
export function limitRequest(body: unknown, extraHeaders = ""): string {
  const json = typeof body === "string" ? body : JSON.stringify(body);
  return (
    "POST /limit HTTP/1.1\r\nHost: ringlimit\r\n" +
    `Authorization: Bearer ${TEST_KEY}\r\nContent-Type: application/json\r\n` +
    extraHeaders +
    `Content-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`
  );
}

/**
 * Requests one at a time on one connection (keep-alive without pipelining): each is written
 * once the answer to the one before it has arrived. Stops at the first close or after `waitMs`.
 */
export function rawSerial(port: number, requests: readonly string[], options: { waitMs?: number } = {}): Promise<RawExchange> {
  let sent = 0;
  return readExchange(port, options.waitMs, ({ socket, responseCount, finish }) => {
    const next = () => {
      if (sent < requests.length) socket.write(requests[sent++]!);
      else finish(false);
    };
    return {
      connected: next,
      received: () => {
        if (responseCount() === sent) next();
      },
    };
  });
}

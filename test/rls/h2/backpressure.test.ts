/**
 * CVE-2019-9517 (internal data buffering): a client that sends calls and never reads the
 * answers. src/rls/h2 stops reading once its writes back up, so what it holds for that client
 * stays bounded, and it reads again once the client does. An in-process server on a real
 * socket; the client is a raw socket that counts bytes.
 */
import net from "node:net";
import t from "tap";
import * as F from "../../../src/rls/h2/frames.js";
import { H2Server } from "../../../src/rls/h2/server.js";
import { until } from "../../harness/wait.js";
import { CHECK_PATH, grpcFields, grpcMessage, headerBlock } from "./raw-h2.js";

/** HEADERS + DATA + trailers of one answer to `ANSWER`: 28 + 16 + 24 bytes (response-blocks.ts). */
const ANSWER = Buffer.from([0x08, 0x01]);
const ANSWER_BYTES = 9 + 19 + 9 + 5 + ANSWER.length + 9 + 15;

t.test("a client that does not read: the server stops reading, holds little, and goes on when it reads", async (t) => {
  const server = new H2Server(
    {
      limits: { maxConcurrentStreams: 100, maxHeaderListBytes: 16384, maxBodyBytes: 1 << 20, pending: { bytes: 0, max: 1 << 24 } },
      maxConnections: 10,
      prefaceTimeoutMs: 60_000,
      idleTimeoutMs: 60_000,
    },
    { opened: () => {}, complete: (stream) => stream.reply(ANSWER), expired: () => {} },
  );
  const port = await server.listen(0, "127.0.0.1");
  t.teardown(() => server.close(0));
  const socket = net.connect(port, "127.0.0.1");
  t.teardown(() => socket.destroy());
  await new Promise((r) => socket.once("connect", r));
  let received = 0;
  socket.on("data", (c: Buffer) => (received += c.length));
  socket.pause();
  // Windows wide open: what holds the answers back is the socket alone, not flow control.
  socket.write(
    Buffer.concat([F.PREFACE, F.settingsFrame([[F.SETTINGS_INITIAL_WINDOW_SIZE, F.MAX_WINDOW]]), F.windowUpdateFrame(0, F.MAX_WINDOW - F.DEFAULT_WINDOW)]),
  );
  const block = headerBlock(grpcFields(CHECK_PATH));
  const body = grpcMessage();
  let id = 1;
  let calls = 0;
  const connection = () => [...server.connections][0];
  // Calls in batches until the server has stopped reading (at most 60 MB of answers' worth).
  while (calls < 1_000_000) {
    const frames: Buffer[] = [];
    for (let i = 0; i < 5000; i++, id += 2) frames.push(F.frame(F.HEADERS, F.END_HEADERS, id, block), F.frame(F.DATA, F.END_STREAM, id, body));
    calls += 5000;
    socket.write(Buffer.concat(frames));
    // the server runs in this process: it needs the turns
    await new Promise((r) => setTimeout(r, 20));
    const server = connection();
    if (server !== undefined && server.pausedAt !== 0 && socket.writableLength > 0) break;
  }
  const c = connection()!;
  t.not(c.pausedAt, 0, "the server stopped reading");
  t.ok(c.socket.writableLength < 4 * 1024 * 1024, `its write backlog stays bounded (${c.socket.writableLength} bytes)`);
  const held = c.socket.writableLength;
  await new Promise((r) => setTimeout(r, 300));
  t.ok(c.socket.writableLength <= held, "and does not grow while the client does not read");
  socket.resume();
  await until("every call answered", () => received >= calls * ANSWER_BYTES, 60_000);
  t.equal(c.pausedAt, 0, "reading again");
  t.pass(`${calls} calls answered`);
});

/**
 * ringlimit's own HTTP/2 on the gRPC port of a real node (GRPC_SERVER_IMPL=ringlimit), on
 * raw frames: the preface and SETTINGS, what HTTP/2 servers are attacked with (floods,
 * rapid reset, CONTINUATION, oversized header lists, windows), HPACK kept in step on refused
 * streams, flow control both ways, timeouts and GOAWAY.
 */
import t, { type Test } from "tap";
import * as F from "../../../src/rls/h2/frames.js";
import { TEST_KEY } from "../../harness/http-client.js";
import { spawnNode } from "../../harness/node-process.js";
import { freePort } from "../../harness/ports.js";
import { sleep } from "../../harness/wait.js";
import { checkCall, CHECK_PATH, grpcFields, grpcMessage, headerBlock, RawH2, WATCH_PATH } from "./raw-h2.js";

async function grpcPort(t: Test, env: Record<string, string> = {}): Promise<number> {
  const port = await freePort();
  const node = await spawnNode({ GRPC_PORT: String(port), GRPC_SERVER_IMPL: "ringlimit", ...env });
  t.teardown(() => node.kill());
  return port;
}

async function connect(t: Test, port: number, options?: Parameters<typeof RawH2.connect>[1]): Promise<RawH2> {
  const c = await RawH2.connect(port, options);
  t.teardown(() => c.close());
  return c;
}

const setting = (id: number, value: number): Buffer => {
  const b = Buffer.alloc(6);
  b.writeUInt16BE(id, 0);
  b.writeUInt32BE(value, 2);
  return b;
};

t.test("one node, default bounds", async (t) => {
  const port = await grpcPort(t);

  t.test("the server's SETTINGS, the ACK of ours, and a health Check answered", async (t) => {
    const c = await connect(t, port);
    const settings = await c.waitFor("the server's SETTINGS", (f) => f.type === F.SETTINGS && f.flags === 0);
    const values = new Map<number, number>();
    for (let p = 0; p < settings.payload.length; p += 6) values.set(settings.payload.readUInt16BE(p), settings.payload.readUInt32BE(p + 2));
    t.equal(values.get(F.SETTINGS_MAX_CONCURRENT_STREAMS), 100, "GRPC_MAX_CONCURRENT_STREAMS announced");
    t.equal(values.get(F.SETTINGS_MAX_HEADER_LIST_SIZE), 16384, "a header list bound announced");
    await c.waitFor("SETTINGS ACK", (f) => f.type === F.SETTINGS && f.flags === F.ACK);
    c.send(checkCall(1));
    const trailers = await c.trailers(1);
    t.equal(trailers.fields!["grpc-status"], "0");
    const data = c.frames.find((f) => f.type === F.DATA && f.id === 1)!;
    t.same([...data.payload], [0, 0, 0, 0, 2, 0x08, 0x01], "HealthCheckResponse { status: SERVING }");
  });

  t.test("a connection that does not start with the preface: GOAWAY PROTOCOL_ERROR, closed", async (t) => {
    const c = await connect(t, port, { preface: false });
    c.send(Buffer.from("GET / HTTP/1.1\r\nhost: x\r\n\r\n"));
    t.equal(await c.goaway(), F.PROTOCOL_ERROR);
    await c.waitClosed();
  });

  t.test("SETTINGS values checked: each bad one is a connection error", async (t) => {
    for (const [payload, code, why] of [
      [setting(F.SETTINGS_ENABLE_PUSH, 2), F.PROTOCOL_ERROR, "ENABLE_PUSH 2"],
      [setting(F.SETTINGS_INITIAL_WINDOW_SIZE, 2 ** 31), F.FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE 2^31"],
      [setting(F.SETTINGS_MAX_FRAME_SIZE, 100), F.PROTOCOL_ERROR, "MAX_FRAME_SIZE 100"],
      [Buffer.alloc(5), F.FRAME_SIZE_ERROR, "a length not a multiple of 6"],
    ] as const) {
      const c = await connect(t, port, { preface: false });
      c.send(Buffer.concat([F.PREFACE, F.frame(F.SETTINGS, 0, 0, payload)]));
      t.equal(await c.goaway(), code, why);
      await c.waitClosed();
    }
    const c = await connect(t, port);
    c.frame(F.SETTINGS, F.ACK, 0, Buffer.alloc(6));
    t.equal(await c.goaway(), F.FRAME_SIZE_ERROR, "a SETTINGS ACK with a payload");
  });

  t.test("floods end in GOAWAY ENHANCE_YOUR_CALM: PING, SETTINGS, empty DATA, PRIORITY, resets of closed streams", async (t) => {
    const floods: [string, () => Buffer][] = [
      ["PING", () => F.frame(F.PING, 0, 0, Buffer.alloc(8))],
      ["SETTINGS", () => F.settingsFrame([])],
      ["PRIORITY", () => F.frame(F.PRIORITY, 0, 1, Buffer.alloc(5))],
    ];
    for (const [name, one] of floods) {
      const c = await connect(t, port);
      c.send(Buffer.concat(Array.from({ length: 5000 }, one)));
      t.equal(await c.goaway(), F.ENHANCE_YOUR_CALM, name);
      await c.waitClosed();
    }
    // empty DATA on an open stream
    const c = await connect(t, port);
    c.frame(F.HEADERS, F.END_HEADERS, 1, headerBlock(grpcFields(CHECK_PATH)));
    c.send(Buffer.concat(Array.from({ length: 5000 }, () => F.frame(F.DATA, 0, 1))));
    t.equal(await c.goaway(), F.ENHANCE_YOUR_CALM, "empty DATA");
    // RST_STREAM on streams already answered
    const r = await connect(t, port);
    r.send(checkCall(1));
    await r.trailers(1);
    r.send(Buffer.concat(Array.from({ length: 5000 }, () => F.rstStreamFrame(1, F.CANCEL))));
    t.equal(await r.goaway(), F.ENHANCE_YOUR_CALM, "RST_STREAM of a closed stream");
  });

  t.test("rapid reset (CVE-2023-44487): streams opened and reset at once are counted", async (t) => {
    const c = await connect(t, port);
    const frames: Buffer[] = [];
    for (let i = 0; i < 3000; i++) {
      const id = 1 + 2 * i;
      frames.push(F.frame(F.HEADERS, F.END_HEADERS, id, headerBlock(grpcFields(CHECK_PATH))), F.rstStreamFrame(id, F.CANCEL));
    }
    c.send(Buffer.concat(frames));
    t.equal(await c.goaway(), F.ENHANCE_YOUR_CALM);
    await c.waitClosed();
  });

  t.test("CONTINUATION floods: a header block is bounded in frames and in bytes", async (t) => {
    const frames = await connect(t, port);
    frames.frame(F.HEADERS, 0, 1, headerBlock(grpcFields(CHECK_PATH)));
    frames.send(Buffer.concat(Array.from({ length: 1000 }, () => F.frame(F.CONTINUATION, 0, 1))));
    t.equal(await frames.goaway(), F.ENHANCE_YOUR_CALM, "empty CONTINUATION frames");
    const bytes = await connect(t, port);
    bytes.frame(F.HEADERS, 0, 1, headerBlock(grpcFields(CHECK_PATH)));
    bytes.send(Buffer.concat(Array.from({ length: 10 }, () => F.frame(F.CONTINUATION, 0, 1, Buffer.alloc(16000, 0x82)))));
    t.equal(await bytes.goaway(), F.ENHANCE_YOUR_CALM, "160 kB of block");
    const interrupted = await connect(t, port);
    interrupted.frame(F.HEADERS, 0, 1, headerBlock(grpcFields(CHECK_PATH)));
    interrupted.frame(F.PING, 0, 0, Buffer.alloc(8));
    t.equal(await interrupted.goaway(), F.PROTOCOL_ERROR, "a block interrupted by another frame");
  });

  t.test("a header list past the bound: 431 on that stream, the connection goes on", async (t) => {
    const c = await connect(t, port);
    const block = headerBlock(grpcFields(CHECK_PATH, [["x-big", "x".repeat(20_000)]]));
    c.frame(F.HEADERS, 0, 1, block.subarray(0, 16_000));
    c.frame(F.CONTINUATION, F.END_HEADERS, 1, block.subarray(16_000));
    const answer = await c.waitFor("the answer of stream 1", (f) => f.id === 1 && f.type === F.HEADERS);
    t.equal(answer.fields![":status"], "431");
    c.send(checkCall(3));
    t.equal((await c.trailers(3)).fields!["grpc-status"], "0", "the next call is answered");
  });

  t.test("flow control: a body past 64 KiB gets WINDOW_UPDATEs; answers honour the client's window", async (t) => {
    const c = await connect(t, port);
    // with its key: a call without one is answered UNAUTHENTICATED at its headers, its body never read
    const key: [string, string][] = [["authorization", `Bearer ${TEST_KEY}`]];
    c.frame(F.HEADERS, F.END_HEADERS, 1, headerBlock(grpcFields("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", key)));
    c.frame(F.DATA, 0, 1, Buffer.alloc(16_000));
    c.frame(F.DATA, 0, 1, Buffer.alloc(16_000));
    c.frame(F.DATA, 0, 1, Buffer.alloc(16_000));
    const update = await c.waitFor("WINDOW_UPDATE of stream 1", (f) => f.type === F.WINDOW_UPDATE && f.id === 1);
    t.ok(update.payload.readUInt32BE(0) >= 32_000, "the stream's window topped up as the body arrives");
    await c.waitFor("WINDOW_UPDATE of the connection", (f) => f.type === F.WINDOW_UPDATE && f.id === 0);

    const slow = await connect(t, port, { settings: [[F.SETTINGS_INITIAL_WINDOW_SIZE, 3]] });
    slow.send(checkCall(1));
    await slow.waitFor("HEADERS of stream 1", (f) => f.type === F.HEADERS && f.id === 1);
    const first = await slow.waitFor("DATA of stream 1", (f) => f.type === F.DATA && f.id === 1);
    t.equal(first.payload.length, 3, "no more DATA than the client's window");
    await sleep(200);
    t.notOk(
      slow.frames.some((f) => f.id === 1 && (f.flags & F.END_STREAM) !== 0),
      "the trailers wait behind the DATA",
    );
    slow.send(F.windowUpdateFrame(1, 100));
    t.equal((await slow.trailers(1)).fields!["grpc-status"], "0");
    const data = Buffer.concat(slow.frames.filter((f) => f.type === F.DATA && f.id === 1).map((f) => f.payload));
    t.same([...data], [0, 0, 0, 0, 2, 0x08, 0x01], "the message whole, in order");
  });

  t.test("GOAWAY from the client: the connection closes once its calls are answered", async (t) => {
    const c = await connect(t, port);
    c.frame(F.HEADERS, F.END_HEADERS, 1, headerBlock(grpcFields(CHECK_PATH)));
    c.send(F.goawayFrame(0, F.NO_ERROR));
    await sleep(100);
    t.notOk(c.closed, "a call still open keeps it");
    c.frame(F.DATA, F.END_STREAM, 1, grpcMessage());
    t.equal((await c.trailers(1)).fields!["grpc-status"], "0");
    await c.waitClosed();
  });

  t.test("frames a client may not send: PUSH_PROMISE, even stream ids, DATA on an idle stream", async (t) => {
    for (const [bytes, why] of [
      [F.frame(F.PUSH_PROMISE, F.END_HEADERS, 1, Buffer.alloc(4)), "PUSH_PROMISE"],
      [F.frame(F.HEADERS, F.END_HEADERS, 2, headerBlock(grpcFields(CHECK_PATH))), "an even stream id"],
      [F.frame(F.DATA, 0, 7, Buffer.alloc(1)), "DATA on an idle stream"],
      [F.windowUpdateFrame(0, 0), "a WINDOW_UPDATE of 0"],
    ] as const) {
      const c = await connect(t, port);
      c.send(bytes);
      t.equal(await c.goaway(), F.PROTOCOL_ERROR, why);
    }
    const c = await connect(t, port);
    c.send(F.windowUpdateFrame(0, 2 ** 31 - 1));
    t.equal(await c.goaway(), F.FLOW_CONTROL_ERROR, "a connection window past 2^31-1");
  });

  t.test("a stream id below one already used (h2spec 5.1.1 #2): PROTOCOL_ERROR; a block on a stream we ended first is dropped", async (t) => {
    const c = await connect(t, port);
    c.send(checkCall(5)); // ids 1 and 3 skipped: opening 5 closed them (RFC 9113 §5.1.1)
    t.equal((await c.trailers(5)).fields!["grpc-status"], "0");
    c.send(F.frame(F.HEADERS, F.END_HEADERS | F.END_STREAM, 3, headerBlock(grpcFields(CHECK_PATH))));
    t.equal(await c.goaway(), F.PROTOCOL_ERROR, "HEADERS on skipped stream 3");
    // the other side of the rule: stream 1 answered (an unknown method: UNIMPLEMENTED from its
    // headers) before the client ended it, so its trailers may be in flight: decoded and
    // dropped, and stream 3 is served after them
    const d = await connect(t, port);
    d.send(F.frame(F.HEADERS, F.END_HEADERS, 1, headerBlock(grpcFields("/no.Such/Method"))));
    t.equal((await d.trailers(1)).fields!["grpc-status"], "12", "UNIMPLEMENTED before the request ended");
    d.send(F.frame(F.HEADERS, F.END_HEADERS | F.END_STREAM, 1, headerBlock([["x-trailer", "1"]])));
    d.send(checkCall(3));
    t.equal((await d.trailers(3)).fields!["grpc-status"], "0", "the connection goes on");
    t.notOk(
      d.frames.some((f) => f.type === F.GOAWAY),
      "no GOAWAY",
    );
  });
});

t.test("gRPC bounds: a head declaring 4 GiB refused at once, an unfinished message ends at grpc-timeout, Watch streams per connection", async (t) => {
  const port = await grpcPort(t, { GRPC_AUTH: "none" });
  const c = await connect(t, port);
  const head = Buffer.from([0, 0xff, 0xff, 0xff, 0xff]);
  c.frame(F.HEADERS, F.END_HEADERS, 1, headerBlock(grpcFields(CHECK_PATH)));
  c.frame(F.DATA, 0, 1, Buffer.concat([head, Buffer.alloc(100)]));
  t.equal((await c.trailers(1)).fields!["grpc-status"], "8", "RESOURCE_EXHAUSTED before the body ends");
  const started = Date.now();
  c.frame(F.HEADERS, F.END_HEADERS, 3, headerBlock(grpcFields(CHECK_PATH, [["grpc-timeout", "200m"]])));
  c.frame(F.DATA, 0, 3, Buffer.from([0, 0, 0, 0, 10, 1]));
  const late = await c.trailers(3);
  t.equal(late.fields!["grpc-status"], "4", "DEADLINE_EXCEEDED");
  t.ok(Date.now() - started >= 150, "at the deadline, not before");
  c.frame(F.HEADERS, F.END_HEADERS, 5, headerBlock(grpcFields(CHECK_PATH)));
  c.frame(F.DATA, F.END_STREAM, 5, grpcMessage(Buffer.from([0xff])));
  t.equal((await c.trailers(5)).fields!["grpc-status"], "3", "a message that is not a HealthCheckRequest: INVALID_ARGUMENT");

  const w = await connect(t, port);
  for (let i = 0; i < 10; i++) {
    w.frame(F.HEADERS, F.END_HEADERS, 1 + 2 * i, headerBlock(grpcFields(WATCH_PATH)));
    w.frame(F.DATA, F.END_STREAM, 1 + 2 * i, grpcMessage());
  }
  await w.trailers(19);
  const served = new Set(w.frames.filter((f) => f.type === F.DATA).map((f) => f.id));
  t.equal(served.size, 8, "8 Watch streams on one connection");
  t.equal((await w.trailers(17)).fields!["grpc-status"], "8", "the 9th: RESOURCE_EXHAUSTED");
});

t.test("HPACK stays in step on refused streams; GRPC_MAX_CONCURRENT_STREAMS is enforced", async (t) => {
  const port = await grpcPort(t, { GRPC_MAX_CONCURRENT_STREAMS: "1" });
  const c = await connect(t, port);
  // stream 1 (a Watch) holds the one slot
  c.frame(F.HEADERS, F.END_HEADERS, 1, headerBlock(grpcFields(WATCH_PATH)));
  c.frame(F.DATA, F.END_STREAM, 1, grpcMessage());
  await c.waitFor("the Watch's first message", (f) => f.type === F.DATA && f.id === 1);
  // stream 3 is refused, and its block adds `x-probe: remembered` to the dynamic table
  c.frame(F.HEADERS, F.END_HEADERS, 3, headerBlock([...grpcFields(CHECK_PATH), ["x-probe", "remembered"]], ["x-probe"]));
  const refused = await c.waitFor("RST_STREAM of stream 3", (f) => f.type === F.RST_STREAM && f.id === 3);
  t.equal(refused.payload.readUInt32BE(0), F.REFUSED_STREAM);
  c.send(F.rstStreamFrame(1, F.CANCEL));
  // stream 5 refers to that entry (dynamic index 62): decoded as sent only if stream 3's block was decoded
  c.frame(F.HEADERS, F.END_HEADERS, 5, Buffer.concat([headerBlock(grpcFields(CHECK_PATH)), Buffer.from([0xbe])]));
  c.frame(F.DATA, F.END_STREAM, 5, grpcMessage());
  t.equal((await c.trailers(5)).fields!["grpc-status"], "0", "answered: the tables agree");
  t.notOk(
    c.frames.some((f) => f.type === F.GOAWAY),
    "no COMPRESSION_ERROR",
  );
});

t.test("preface and idle timeouts", async (t) => {
  const port = await grpcPort(t, { GRPC_PREFACE_TIMEOUT_MS: "300", GRPC_IDLE_TIMEOUT_MS: "500" });
  const silent = await connect(t, port, { preface: false });
  await silent.waitClosed(5000);
  t.pass("a connection that never sends the preface is closed");
  const idle = await connect(t, port);
  idle.send(checkCall(1));
  await idle.trailers(1);
  t.equal(await idle.goaway(5000), F.NO_ERROR, "GOAWAY NO_ERROR after the idle timeout");
  await idle.waitClosed(5000);
});

t.test("SIGTERM: GOAWAY on open connections, calls in flight answered, then closed", async (t) => {
  const port = await freePort();
  const node = await spawnNode({ GRPC_PORT: String(port), GRPC_SERVER_IMPL: "ringlimit", DRAIN_TIMEOUT_MS: "3000" });
  t.teardown(() => node.kill());
  const c = await connect(t, port);
  c.frame(F.HEADERS, F.END_HEADERS, 1, headerBlock(grpcFields(CHECK_PATH)));
  await c.waitFor("SETTINGS ACK", (f) => f.type === F.SETTINGS && f.flags === F.ACK);
  node.child.kill("SIGTERM");
  t.equal(await c.goaway(), F.NO_ERROR, "GOAWAY NO_ERROR");
  c.frame(F.DATA, F.END_STREAM, 1, grpcMessage());
  await c.trailers(1);
  t.pass("the call open at the GOAWAY is answered");
  await c.waitClosed();
});

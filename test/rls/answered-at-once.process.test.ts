/**
 * Issue #41: what a call's headers already decide is answered at once, on either server of
 * the gRPC port, while the client is still sending (a reflection client such as `grpcurl list`
 * opens a stream and waits for the answer before it ends its side). Before, the own server
 * answered an unknown method only at the end of the request, so such a client waited for the
 * call's deadline. The deadline here is 60 s: an answer that waited for it would be
 * DEADLINE_EXCEEDED, never the status asserted.
 */
import type { ClientHttp2Session, IncomingHttpHeaders } from "node:http2";
import t from "tap";
import { TEST_KEY } from "../harness/http-client.js";
import { call, connect, grpcFrame, HEALTH_CHECK, healthRequest, rlsRequest, SHOULD_RATE_LIMIT, startRlsNode, descriptor } from "./hostile/harness.js";

const UNIMPLEMENTED = 12;
const UNAUTHENTICATED = 16;
const RESOURCE_EXHAUSTED = 8;
const REFLECTION = ["/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"];

/**
 * A call whose side stays open: resolves with the first grpc-status (trailers-only or
 * trailers), then cancels the stream. node:http2's server ends its side without a reset,
 * so the stream would not close on its own while ours is open.
 */
function answerWhileSending(
  session: ClientHttp2Session,
  path: string,
  body: Buffer,
  headers: Record<string, string> = {},
): Promise<{ status: number; message: string }> {
  return new Promise((resolve) => {
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    const take = (h: IncomingHttpHeaders): void => {
      if (h["grpc-status"] === undefined) return;
      resolve({ status: Number(h["grpc-status"]), message: decodeURIComponent(String(h["grpc-message"] ?? "")) });
      stream.close();
    };
    stream.on("response", take);
    stream.on("trailers", take);
    stream.on("error", () => {});
    stream.write(body);
  });
}

for (const impl of ["ringlimit", "node-http2"]) {
  t.test(`GRPC_SERVER_IMPL=${impl}`, async (t) => {
    const { grpcPort } = await startRlsNode(t, { GRPC_SERVER_IMPL: impl, GRPC_DEFAULT_DEADLINE_MS: "60000" });
    const session = await connect(grpcPort);
    t.teardown(() => session.destroy());

    for (const path of [...REFLECTION, "/no.such.Service/Method"]) {
      const r = await answerWhileSending(session, path, Buffer.from([0, 0, 0, 0, 2, 0x3a, 0x00]));
      t.equal(r.status, UNIMPLEMENTED, `${path}: UNIMPLEMENTED while the client still sends`);
      t.match(r.message, /^no method /);
    }

    const noKey = await answerWhileSending(session, SHOULD_RATE_LIMIT, Buffer.alloc(0));
    t.equal(noKey.status, UNAUTHENTICATED, "ShouldRateLimit without a key: UNAUTHENTICATED before its message");

    // grpc.UseCompressor(gzip) sends grpc-encoding: gzip and compressed messages (flag 1)
    const gzipped = Buffer.concat([Buffer.from([1, 0, 0, 0, 3]), Buffer.from([1, 2, 3])]);
    const compressed = await answerWhileSending(session, HEALTH_CHECK, gzipped, { "grpc-encoding": "gzip" });
    t.equal(compressed.status, UNIMPLEMENTED, "a compressed request: UNIMPLEMENTED by its headers");
    t.match(compressed.message, /compressed/);
    const identity = await call(session, HEALTH_CHECK, grpcFrame(healthRequest("")), { "grpc-encoding": "identity" });
    t.equal(identity.status, 0, "grpc-encoding: identity is no compression");

    // 1 MiB of service name: refused by the message head's declared length, the rest not awaited
    const huge = grpcFrame(healthRequest("x".repeat(1 << 20)));
    const big = await answerWhileSending(session, HEALTH_CHECK, huge);
    t.equal(big.status, RESOURCE_EXHAUSTED, "a 1 MiB health Check: RESOURCE_EXHAUSTED before it is all sent");

    // the connection still serves a real call afterwards
    const rls = await call(session, SHOULD_RATE_LIMIT, grpcFrame(rlsRequest("at-once", [descriptor([["k", "v"]], 10)])), {
      authorization: `Bearer ${TEST_KEY}`,
    });
    t.equal(rls.status, 0, "ShouldRateLimit on the same connection");
  });
}

// The floor of a gRPC service on ringlimit's own HTTP/2 (src/rls/h2, the build in dist/):
// every call's body is read and answered with a constant RateLimitResponse (overall_code OK,
// one status OK) and grpc-status 0 in trailers, as grpc-floor.mjs does on node:http2. The
// request headers are HPACK-decoded in full (static and dynamic tables, Huffman); no
// protobuf decoding, no auth, no state: what the RLS door on this server costs at least.
//
// Env: PORT (required), HOST (default 127.0.0.1). Needs `npm run build`.
import { H2Server } from '../../dist/src/rls/h2/server.js'

const PORT = Number(process.env.PORT)
const HOST = process.env.HOST || '127.0.0.1'
// overall_code = OK (08 01), statuses[0] = { code: OK } (12 02 08 01); the 5-byte head is the server's
const ANSWER = Buffer.from([0x08, 0x01, 0x12, 0x02, 0x08, 0x01])

const server = new H2Server(
  {
    limits: { maxConcurrentStreams: 1000, maxHeaderListBytes: 16384, maxBodyBytes: (1 << 20) + 5, pending: { bytes: 0, max: 1 << 26 } },
    maxConnections: 1000,
    prefaceTimeoutMs: 5000,
    idleTimeoutMs: 60000,
  },
  { opened: () => {}, complete: (stream) => stream.reply(ANSWER), expired: () => {} },
)
await server.listen(PORT, HOST)

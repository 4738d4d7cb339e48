// The floor of a gRPC service on Node's own HTTP/2 (node:http2, the layer @grpc/grpc-js is
// built on): every call's body is read and answered with a constant RateLimitResponse
// (overall_code OK, one status OK) and grpc-status 0 in trailers. No protobuf decoding, no
// auth, no state: what any gRPC server written on node:http2, ours included, costs at least.
//
// Env: PORT (required), HOST (default 127.0.0.1).
import http2 from 'node:http2'

const PORT = Number(process.env.PORT)
const HOST = process.env.HOST || '127.0.0.1'
// 5-byte frame head, then overall_code = OK (08 01), statuses[0] = { code: OK } (12 02 08 01)
const ANSWER = Buffer.from([0, 0, 0, 0, 6, 0x08, 0x01, 0x12, 0x02, 0x08, 0x01])

const server = http2.createServer()
server.on('stream', (stream) => {
  stream.on('data', () => {})
  stream.on('end', () => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true })
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }))
    stream.end(ANSWER)
  })
  stream.on('error', () => {})
})
server.listen(PORT, HOST)

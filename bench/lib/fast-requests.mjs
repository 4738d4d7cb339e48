// autocannon rebuilds a request through a generic builder (object copies, header
// loop, a hyperid per request) whenever `setupRequest` is used: measured here at
// ~19 k req/s against the floor, versus ~46 k req/s for a static body. That would make
// the load generator, not the server, the limit of every row with varying identifiers.
//
// This patch gives autocannon 9.0.0 a fast path: a request object carrying
// `fastRequest()` (which returns the whole raw HTTP request as a Buffer) is called
// once per request sent, first request of each connection included; the generic
// builder is skipped. Any other request goes through autocannon's own code.
// Applied only to the pinned version whose internals it was written for
// (lib/requestIterator.js nextRequest, lib/httpClient.js getRequestBuffer).
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const version = require('autocannon/package.json').version
let RequestIterator = null
let Client = null
try {
  RequestIterator = require('autocannon/lib/requestIterator.js')
  Client = require('autocannon/lib/httpClient.js')
} catch {
  /* layout changed */
}

export const fastPathAvailable =
  version === '9.0.0' && typeof RequestIterator?.prototype?.nextRequest === 'function' && typeof Client?.prototype?.getRequestBuffer === 'function'

if (fastPathAvailable) {
  const nextRequest = RequestIterator.prototype.nextRequest
  RequestIterator.prototype.nextRequest = function () {
    const first = this.requests[0]
    if (first !== undefined && typeof first.fastRequest === 'function') {
      this.resetted = false
      this.currentRequest = first
      return first
    }
    return nextRequest.call(this)
  }
  const getRequestBuffer = Client.prototype.getRequestBuffer
  Client.prototype.getRequestBuffer = function () {
    const r = this.requestIterator.currentRequest
    return typeof r.fastRequest === 'function' ? r.fastRequest() : getRequestBuffer.call(this)
  }
}

/** () => Buffer of a full POST request with the next body. */
export function rawRequestFactory({ url, headers, nextBody }) {
  const u = new URL(url)
  let head = `POST ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nConnection: keep-alive\r\n`
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`
  head += 'Content-Length: '
  return () => {
    const body = nextBody()
    return Buffer.from(head + Buffer.byteLength(body) + '\r\n\r\n' + body, 'latin1')
  }
}

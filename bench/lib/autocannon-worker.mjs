// Runs in a worker thread: autocannon (one instance per target, all in this
// thread's event loop, sharing one identifier counter) so that the load generator
// never shares an event loop with the runner's bookkeeping.
// Posts { type: 'started' } once every instance has started, then { type: 'result' }.
import { parentPort, workerData } from 'node:worker_threads'
import autocannon from 'autocannon'
import { Histogram } from './histogram.mjs'
import { bodyFactory } from './bodies.mjs'
import { fastPathAvailable, rawRequestFactory } from './fast-requests.mjs'

const { targets, durationSec, amount, headers, bodySpec, timeoutSec, pipelining = 1 } = workerData
const nextBody = bodyFactory(bodySpec)
const hist = new Histogram()
const allHeaders = { 'content-type': 'application/json', ...headers }

function requestsFor(url) {
  if (fastPathAvailable) {
    // The static body only serves autocannon's initial build, which is never sent:
    // every request sent comes from fastRequest().
    return [{ method: 'POST', body: '{}', fastRequest: rawRequestFactory({ url, headers: allHeaders, nextBody }) }]
  }
  return [
    {
      method: 'POST',
      setupRequest: (req) => {
        req.body = nextBody()
        return req
      },
    },
  ]
}

// autocannon reconnects silently when a server closes a connection: the sockets that carried an
// answer, counted once each, tell how many connections were used (`connections` when none closed).
const seenSockets = new WeakSet()
let sockets = 0

let started = 0
let tStart = performance.now()
const runs = targets.map(
  (t) =>
    new Promise((resolve, reject) => {
      const inst = autocannon(
        {
          url: t.url,
          method: 'POST',
          connections: t.connections,
          pipelining,
          timeout: timeoutSec,
          ...(amount ? { amount: t.amount } : { duration: durationSec }),
          ...(t.rate ? { overallRate: t.rate } : {}),
          headers: allHeaders,
          requests: requestsFor(t.url),
        },
        (err, res) => (err ? reject(err) : resolve(res)),
      )
      inst.on('start', () => {
        if (++started === targets.length) {
          tStart = performance.now()
          parentPort.postMessage({ type: 'started' })
        }
      })
      inst.on('response', (client, statusCode, resBytes, responseTimeMs) => {
        hist.record(responseTimeMs * 1000)
        if (client.conn && !seenSockets.has(client.conn)) {
          seenSockets.add(client.conn)
          sockets++
        }
      })
    }),
)

try {
  const results = await Promise.all(runs)
  const wallSec = (performance.now() - tStart) / 1000
  const status = {}
  let errors = 0
  let timeouts = 0
  let resets = 0
  let completed = 0
  let sent = 0
  for (const r of results) {
    for (const [code, { count }] of Object.entries(r.statusCodeStats)) status[code] = (status[code] ?? 0) + count
    errors += r.errors
    timeouts += r.timeouts
    resets += r.resets
    completed += r.totalCompletedRequests
    sent += r.totalRequests
  }
  parentPort.postMessage({
    type: 'result',
    result: { completed, sent, wallSec, status, errors, timeouts, resets, sockets, fastPath: fastPathAvailable, hist: hist.toSparse() },
  })
} catch (e) {
  parentPort.postMessage({ type: 'error', error: String((e && e.stack) || e) })
}

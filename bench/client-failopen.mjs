// Fail-open timing of RingLimitClient (issue 13): how long a check takes to resolve with the
// client's own answer when its only node accepts and never answers (timeoutMs 50), and when
// the connection is refused. 30 fresh clients each (a client skips a node after one failure).
//
//   npm run build && node bench/client-failopen.mjs
import net from 'node:net'
import { RunConditions } from './lib/conditions.mjs'
import { benchOptions } from './lib/options.mjs'

benchOptions(import.meta.url, {
  about: `How long RingLimitClient takes to fail open (timeoutMs 50) when its only node accepts and
never answers, and when the connection is refused; 30 fresh clients each. In-process, on the
build (npm run build): no server is started besides a silent TCP listener.`,
  options: {},
})
const conditions = new RunConditions()
const { RingLimitClient } = await import('../dist/src/client/index.js')
const sockets = []
const silent = net.createServer((s) => sockets.push(s))
await new Promise((r) => silent.listen(0, '127.0.0.1', r))
const url = `http://127.0.0.1:${silent.address().port}`
const down = await new Promise((r) => {
  const s = net.createServer()
  s.listen(0, '127.0.0.1', () => {
    const p = s.address().port
    s.close(() => r(p))
  })
})
const ms = [],
  refused = []
for (let i = 0; i < 30; i++) {
  const c = new RingLimitClient({ urls: url, apiKey: 'svc_sk_' + 'x'.repeat(40), timeoutMs: 50 })
  const t0 = performance.now()
  const r = await c.limit({ namespace: 'n', identifier: 'i' + i, limit: 5, duration: 60 })
  ms.push(performance.now() - t0)
  if (!(r.allowed && r.degraded)) throw new Error('not fail-open')
  await c.close()
  const d = new RingLimitClient({ urls: `http://127.0.0.1:${down}`, apiKey: 'svc_sk_' + 'x'.repeat(40), timeoutMs: 50 })
  const t1 = performance.now()
  await d.limit({ namespace: 'n', identifier: 'i' + i, limit: 5, duration: 60 })
  refused.push(performance.now() - t1)
  await d.close()
}
const q = (xs, p) => [...xs].sort((a, b) => a - b)[Math.floor(p * (xs.length - 1))].toFixed(1)
console.log(`silent node, timeoutMs 50: min ${q(ms, 0)} p50 ${q(ms, 0.5)} p90 ${q(ms, 0.9)} max ${q(ms, 1)} ms`)
console.log(`refused connection: min ${q(refused, 0)} p50 ${q(refused, 0.5)} p90 ${q(refused, 0.9)} max ${q(refused, 1)} ms`)
for (const s of sockets) s.destroy()
silent.close()
conditions.print()

// A V8 CPU profile (node --cpu-prof) summed by concern: each sample goes to the first frame,
// from the leaf up, that a rule below recognises, so a native call (writev, an HMAC digest)
// is charged to the JavaScript that made it. Idle samples are left out; the shares are of
// the process's busy time.
import { readFileSync } from 'node:fs'

/** [concern, test(functionName, url)], most specific first. */
const RULES = [
  ['GC', (f) => f === '(garbage collector)'],
  ['native, outside JS (uWS HTTP, libuv, syscalls)', (f) => f === '(program)'],
  ['frame tags (HMAC-SHA256)', (f, u) => u.includes('node:internal/crypto') || u.endsWith('/peer/link/session.js')],
  [
    'socket writes (write syscalls; on loopback they carry the TCP delivery too)',
    (f, u) =>
      (u.includes('stream_base_commons') && f !== 'onStreamRead') ||
      f === 'Socket._writeGeneric' ||
      f === 'Socket._write' ||
      f === 'writeOrBuffer' ||
      f === 'Writable.write',
  ],
  [
    'socket reads (node:net, stream events)',
    (f, u) => u.includes('stream_base_commons') || u === 'node:net' || u.includes('node:internal/streams') || u.includes('node:internal/net'),
  ],
  ['timers', (f, u) => u.includes('node:internal/timers') || u === 'node:timers'],
  ['setImmediate', (f) => f === 'processImmediate'],
  ['promises, nextTick', (f, u) => f === 'processTicksAndRejections' || f === 'runMicrotasks' || u.includes('node:internal/process/task_queues')],
  ['replication (ringlimit)', (f, u) => u.includes('/dist/src/shard/cluster/movement/') || u.includes('/dist/src/shard/records/')],
  ['peer frames: encode, decode, queue (ringlimit)', (f, u) => u.includes('/dist/src/peer/')],
  ['forwarding and inbound routing (ringlimit)', (f, u) => u.includes('/dist/src/shard/cluster/')],
  ['decision and state table (ringlimit)', (f, u) => u.includes('/dist/src/shard/') || u.includes('/dist/src/algorithms/') || u.includes('/dist/src/policy/')],
  ['metrics, logging', (f, u) => u.includes('prom-client') || u.includes('pino') || u.includes('/dist/src/metrics/')],
  ['HTTP front end (ringlimit)', (f, u) => u.includes('/dist/src/')],
]
const OTHER = 'other JavaScript (Node internals, V8 builtins)'

function concernOf(node, parent) {
  for (let n = node; n !== undefined; n = parent.get(n.id)) {
    const f = n.callFrame.functionName
    const u = n.callFrame.url
    if (f === '(idle)') return null
    for (const [name, test] of RULES) if (test(f, u)) return name
  }
  return OTHER
}

/**
 * { busyMs, concerns: [[name, ms]] sorted by ms } of one .cpuprofile file, over the samples
 * taken between `fromMs` and `toMs` after the profile began (the measured window; start-up
 * and warm-up left out).
 */
export function summarizeProfile(file, fromMs = 0, toMs = Infinity) {
  const p = JSON.parse(readFileSync(file, 'utf8'))
  const byId = new Map(p.nodes.map((n) => [n.id, n]))
  const parent = new Map()
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n)
  const cache = new Map()
  const ms = new Map()
  let busy = 0
  let at = 0
  for (let i = 0; i < p.samples.length; i++) {
    const id = p.samples[i]
    const dt = (p.timeDeltas[i] ?? 0) / 1000
    at += dt
    if (at < fromMs || at > toMs) continue
    let c = cache.get(id)
    if (c === undefined) cache.set(id, (c = concernOf(byId.get(id), parent)))
    if (c === null) continue
    busy += dt
    ms.set(c, (ms.get(c) ?? 0) + dt)
  }
  return { busyMs: busy, concerns: [...ms].sort((a, b) => b[1] - a[1]) }
}

#!/usr/bin/env node
// Issue 40: the worker hop alone, without HTTP: one worker thread's RingDecider asks the main
// thread's RingServer, whose Decider answers at once (decideSync, no table), so what is measured
// is the rings, the codec and the wake-ups. Two rows: one decision in flight at a time (the
// round trip's p50/p99, what a lone caller pays) and `--depth` in flight (µs of CPU per decision
// on each thread, from /proc/self/task).
//
//   node bench/workers-hop.mjs [--seconds 3] [--depth 256] [--build DIR]
//
// --build DIR: the rings of another checkout's build (DIR/dist), for a before/after in one run.
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads'
import { readFileSync, readdirSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { loadavg } from 'node:os'
import { fileURLToPath } from 'node:url'
import { dirname, join } from 'node:path'
import { Histogram } from './lib/histogram.mjs'

const buildArg = process.argv.indexOf('--build')
const root = isMainThread ? (buildArg > 0 ? process.argv[buildArg + 1] : join(dirname(fileURLToPath(import.meta.url)), '..')) : workerData.root
const dist = join(root, 'dist', 'src')
const { ByteRing } = await import(join(dist, 'workers/byte-ring.js'))
const { RingServer } = await import(join(dist, 'workers/ring-server.js'))
const { RingDecider, goneWords } = await import(join(dist, 'workers/ring-decider.js'))
// Builds since the callers-gone words take them as a third ring argument; older ones do not.
const withGone = (rings, gone) => (goneWords === undefined ? rings : [...rings, gone])
const { newDecision } = await import(join(dist, 'decision.js'))
const { DEFAULT_ALGORITHM, algorithmByName } = await import(join(dist, 'algorithms/index.js'))

if (isMainThread) {
  const { benchOptions } = await import('./lib/options.mjs')
  const { values } = benchOptions(import.meta.url, {
    about: 'The worker hop alone (rings, codec, wake-ups) with a Decider that answers at once. Needs the build (npm run build).',
    options: {
      seconds: { type: 'number', min: 1, default: 3, help: 'seconds per row' },
      depth: { type: 'number', min: 1, default: 256, help: 'decisions in flight for the CPU row' },
      build: { type: 'string', arg: 'DIR', defaultText: 'this checkout', help: "another checkout whose build's rings to measure (DIR/dist)" },
    },
  })
  const TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim())
  const names = new Map()
  const cpu = () => {
    const out = new Map()
    for (const tid of readdirSync('/proc/self/task')) {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8')
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      out.set(tid, (Number(rest[11]) + Number(rest[12])) * TICK_US)
      names.set(tid, stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')))
    }
    return out
  }
  const queries = ByteRing.create(1 << 20)
  const answers = ByteRing.create(1 << 19)
  const d = newDecision()
  d.allowed = true
  d.remaining = 5
  let decided = 0
  const decider = { decideSync: () => (decided++, d), decide: () => {} }
  const logger = { error: (o, m) => console.error(m, o) }
  const gone = goneWords?.()
  const server = new RingServer(...withGone([queries, answers], gone), decider, logger)
  const worker = new Worker(fileURLToPath(import.meta.url), { workerData: { queries, answers, gone, root } })
  console.log(
    `${root}: load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  )
  for (const depth of [1, values.depth]) {
    const result = new Promise((r) => worker.once('message', r))
    const before = cpu()
    const d0 = decided
    // wake-ups the owner sent (answers) and skipped; the worker reports its own (queries)
    const a0 = [server.answers.wakes ?? 0, server.answers.wakesSkipped ?? 0]
    worker.postMessage({ depth, seconds: values.seconds })
    const w = await result
    const after = cpu()
    const n = decided - d0
    const wakes = (server.answers.wakes ?? NaN) - a0[0]
    const skipped = (server.answers.wakesSkipped ?? NaN) - a0[1]
    const main = after.get(String(process.pid)) - before.get(String(process.pid))
    let other = 0
    const rows = []
    for (const [tid, us] of after)
      if (tid !== String(process.pid)) {
        const spent = us - (before.get(tid) ?? 0)
        other += spent
        if (spent / n >= 0.05) rows.push(`${names.get(tid)} ${(spent / n).toFixed(2)}`)
      }
    console.log(
      `depth ${depth}: ${Math.round(n / values.seconds)} decisions/s, round trip p50 ${w.p50.toFixed(1)} µs p99 ${w.p99.toFixed(1)} µs max ${w.max.toFixed(0)} µs; ` +
        `wake-ups per decision: to the worker ${(wakes / n).toFixed(3)} (${(skipped / n).toFixed(3)} skipped), to the owner ${(w.wakes / n).toFixed(3)} (${(w.skipped / n).toFixed(3)} skipped); ` +
        `CPU µs/decision: main ${(main / n).toFixed(2)}, other threads ${(other / n).toFixed(2)} (${rows.join(', ')})`,
    )
  }
  server.close()
  await worker.terminate()
} else {
  const { queries, answers, gone } = workerData
  const decider = new RingDecider(...withGone([queries, answers], gone), parentPort)
  const q = { namespace: 'bench', identifier: 'u1', limit: 1000, duration: 60, algorithm: algorithmByName(DEFAULT_ALGORITHM), cost: 1 }
  parentPort.on('message', ({ depth, seconds }) => {
    const hist = new Histogram()
    const end = performance.now() + seconds * 1000
    const q0 = [decider.queries.wakes ?? 0, decider.queries.wakesSkipped ?? 0]
    let open = 0
    const one = () => {
      const at = performance.now()
      open++
      decider.decide(q, Date.now(), () => {
        const t = performance.now()
        hist.record((t - at) * 1000)
        open--
        if (t < end) one()
        else if (open === 0)
          parentPort.postMessage({
            p50: hist.percentile(50),
            p99: hist.percentile(99),
            max: hist.max,
            wakes: (decider.queries.wakes ?? NaN) - q0[0],
            skipped: (decider.queries.wakesSkipped ?? NaN) - q0[1],
          })
        return true
      })
    }
    for (let i = 0; i < depth; i++) one()
  })
}

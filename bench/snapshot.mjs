// Snapshot figures (issue 11): time to write the state table of N keys to disk, the
// longest event-loop pause it causes, the file size, and the time to load it back.
//
//   npm run build && node bench/snapshot.mjs [--keys 1000000] [--dir /tmp]
//
// In-process, on the compiled modules: a StateTable filled with N keys (every algorithm,
// realistic key lengths), written with the node's own writer while a timer measures the
// event loop (perf_hooks.monitorEventLoopDelay, 1 ms resolution), then read back into an
// empty table through the same merge the node uses at start.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { RunConditions } from './lib/conditions.mjs'
import { benchOptions } from './lib/options.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `Snapshots, in-process on the build (npm run build): time to write the state table of N keys,
the longest event-loop pause it causes, the file's size, and the time to load it back.`,
  options: {
    keys: { type: 'number', min: 1, default: 1_000_000, help: 'keys in the table' },
    dir: { type: 'string', arg: 'DIR', defaultText: 'the system temporary folder', help: 'where the snapshot file is written' },
  },
})
const conditions = new RunConditions()
const { ALGORITHMS, newStep } = await import('../dist/src/algorithms/index.js')
const { mergeState } = await import('../dist/src/shard/records/merge-states.js')
const { readSnapshot, snapshotKey, writeSnapshot } = await import('../dist/src/shard/records/snapshot-file.js')
const { ringKeyOf, stateKeyOf } = await import('../dist/src/shard/ring/state-key.js')
const { StateTable } = await import('../dist/src/shard/table/state-table.js')
const KEYS = args.keys
const dir = mkdtempSync(path.join(args.dir ?? tmpdir(), 'ringlimit-bench-snapshot-'))
const file = path.join(dir, 'ringlimit.snapshot')
const identity = { key: snapshotKey(Buffer.alloc(32, 7)), nodeId: '10.0.0.1:9080' }

const now = Date.now()
const table = new StateTable(KEYS + 1, now)
const out = newStep()
for (let i = 0; i < KEYS; i++) {
  const alg = ALGORITHMS[i % 4]
  table.decide(stateKeyOf(alg.code, 3600, ringKeyOf('checkout.mobile-app', `user-${i}-${(i * 2654435761) >>> 0}`)), alg, 100, 3_600_000, now, out)
}

async function measured(label, fn) {
  const h = monitorEventLoopDelay({ resolution: 1 })
  // A timer that keeps the loop busy with short turns, as requests would.
  const tick = setInterval(() => {}, 1)
  h.enable()
  const started = performance.now()
  const cpu = process.cpuUsage()
  const result = await fn()
  const ms = performance.now() - started
  const used = process.cpuUsage(cpu)
  h.disable()
  clearInterval(tick)
  // monitorEventLoopDelay reports the delay beyond its resolution, in ns.
  return { label, ms, cpuMs: (used.user + used.system) / 1000, maxPauseMs: h.max / 1e6, p99PauseMs: h.percentile(99) / 1e6, result }
}

const copies = []
for (let i = 0; i < 5; i++) {
  const cpu = process.cpuUsage()
  const started = performance.now()
  table.copy()
  const used = process.cpuUsage(cpu)
  copies.push({ ms: performance.now() - started, cpuMs: (used.user + used.system) / 1000 })
}

const rows = []
for (let run = 0; run < 3; run++) {
  const w = await measured('write', async () => writeSnapshot(file, identity, table.copy(), undefined, Date.now()))
  rows.push({ ...w, bytes: w.result.bytes, longestStepMs: w.result.longestStepMs })
  const restored = new StateTable(KEYS + 1, now)
  const r = await measured('restore', async () => readSnapshot(file, identity, (key, state) => mergeState(restored, key, state, now)))
  if (restored.size !== KEYS) throw new Error(`restored ${restored.size} of ${KEYS}`)
  rows.push({ ...r, bytes: r.result.bytes })
}
rmSync(dir, { recursive: true, force: true })

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const summary = (label) => {
  const rs = rows.filter((r) => r.label === label)
  return {
    ms: median(rs.map((r) => r.ms)).toFixed(0),
    cpuMs: median(rs.map((r) => r.cpuMs)).toFixed(0),
    maxPauseMs: median(rs.map((r) => r.maxPauseMs)).toFixed(1),
    p99PauseMs: median(rs.map((r) => r.p99PauseMs)).toFixed(1),
    MB: (rs[0].bytes / 1e6).toFixed(1),
  }
}
console.log(`snapshot of ${KEYS.toLocaleString('en')} keys, median of 3 runs, node ${process.version}`)
console.log(
  `column copy (the one synchronous step of a write), median of 5: ${median(copies.map((c) => c.ms)).toFixed(1)} ms wall, ${median(copies.map((c) => c.cpuMs)).toFixed(1)} ms CPU`,
)
console.table({ write: summary('write'), restore: summary('restore') })
console.log('wall times and pauses grow with the load average; CPU times do not')
conditions.print()

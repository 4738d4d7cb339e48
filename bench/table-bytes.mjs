#!/usr/bin/env node
// The state table's own byte estimate (StateTable.bytes, the figure MAX_MEMORY_MB bounds)
// against what the process measures: heapUsed + arrayBuffers after gc, for short and for
// maximal keys.   node --expose-gc bench/table-bytes.mjs [dist dir, default ./dist]
import { join, resolve } from 'node:path'

if (typeof gc !== 'function') throw new Error('run with node --expose-gc')
const dist = resolve(process.argv[2] ?? 'dist')
const { StateTable } = await import(join(dist, 'src/shard/table/state-table.js'))
const { newStep } = await import(join(dist, 'src/algorithms/index.js'))
const { fixedWindow } = await import(join(dist, 'src/algorithms/fixed-window.js'))
const T0 = 1_800_000_000_000
const out = newStep()
const shapes = [
  ['short', 500_000, (i) => `03600:5:benchuser-${i}`],
  ['maximal', 20_000, (i) => `03600:${'中'.repeat(256)}.${'rad-s2-'.repeat(110)}${'中'.repeat(500)}${String(i).padStart(12, '0')}`],
]
const keep = []
for (const [name, n, key] of shapes) {
  gc()
  const m0 = process.memoryUsage()
  const table = new StateTable(10_000_000, T0)
  for (let i = 0; i < n; i++) table.decide(key(i), fixedWindow, 10, 3_600_000, T0, out)
  gc()
  const m1 = process.memoryUsage()
  const measured = m1.heapUsed - m0.heapUsed + (m1.arrayBuffers - m0.arrayBuffers)
  console.log(
    `${name.padEnd(8)} ${n} keys: estimate ${(table.bytes / n).toFixed(0)} B/key, measured ${(measured / n).toFixed(0)} B/key (${(table.bytes / measured).toFixed(2)}x)`,
  )
  keep.push(table)
}

#!/usr/bin/env node
// The state table's own byte estimate (StateTable.bytes, the figure MAX_MEMORY_MB bounds)
// against what the process measures: heapUsed + arrayBuffers after gc, for short and for
// maximal keys.   node --expose-gc bench/table-bytes.mjs [dist dir, default ./dist]
import { join, resolve } from 'node:path'
import { RunConditions } from './lib/conditions.mjs'
import { benchOptions } from './lib/options.mjs'

const { positionals } = benchOptions(import.meta.url, {
  about: `The state table's own byte estimate (StateTable.bytes, what MAX_MEMORY_MB bounds) against
what the process measures after gc, for short and for maximal keys. In-process; run it with
node --expose-gc.`,
  options: {},
  positionals: [{ name: 'dist', help: "a build's dist/ folder", default: './dist' }],
})
if (typeof gc !== 'function') {
  process.stderr.write('bench/table-bytes.mjs: run with node --expose-gc bench/table-bytes.mjs\n')
  process.exit(2)
}
const conditions = new RunConditions()
const dist = resolve(positionals[0])
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
conditions.print()

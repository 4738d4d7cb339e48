#!/usr/bin/env node
// The state table's CPU in one process, for one build or two alternately (before/after in one
// run): N keys inserted, then M decisions on stored keys; ns per operation, 3 rounds.
//   node bench/table-cpu.mjs [dist dir, default ./dist] [another dist dir]
import { join, resolve } from 'node:path'
import { RunConditions } from './lib/conditions.mjs'
import { benchOptions } from './lib/options.mjs'

const { positionals } = benchOptions(import.meta.url, {
  about: `The state table's CPU in one process: 200,000 keys inserted (its growth steps included), then
2,000,000 decisions on stored keys, ns per operation; with a second build, both alternately, 3 rounds.`,
  options: {},
  positionals: [
    { name: 'dist', help: "a build's dist/ folder", default: './dist' },
    { name: 'other', help: "another build's dist/ folder, run alternately", default: '' },
  ],
})
const conditions = new RunConditions()
const builds = []
for (const d of positionals.filter(Boolean).map((p) => resolve(p))) {
  const { StateTable } = await import(join(d, 'src/shard/table/state-table.js'))
  const { newStep } = await import(join(d, 'src/algorithms/index.js'))
  const { fixedWindow } = await import(join(d, 'src/algorithms/fixed-window.js'))
  builds.push({ d, StateTable, newStep, fixedWindow })
}
const N = 200_000
const M = 2_000_000
const keys = Array.from({ length: N }, (_, i) => '03600:3:memk-' + i)
for (let round = 0; round < 3; round++) {
  for (const b of builds) {
    const T0 = Date.now()
    const out = b.newStep()
    const table = new b.StateTable(5_000_000, T0, 256 * 2 ** 20)
    table.trackChanges(() => {})
    let t0 = process.hrtime.bigint()
    for (let i = 0; i < N; i++) table.decide(keys[i], b.fixedWindow, 1e9, 3_600_000, T0, out)
    const insert = Number(process.hrtime.bigint() - t0) / N
    table.takeChanges()
    t0 = process.hrtime.bigint()
    for (let i = 0; i < M; i++) {
      table.decide(keys[(i * 7919) % N], b.fixedWindow, 1e9, 3_600_000, T0, out)
      if ((i & 65535) === 0) table.takeChanges()
    }
    const decide = Number(process.hrtime.bigint() - t0) / M
    console.log(`${b.d.padEnd(24)} round ${round + 1}: insert ${insert.toFixed(0)} ns a key, decide on a stored key ${decide.toFixed(0)} ns`)
  }
}
conditions.print()

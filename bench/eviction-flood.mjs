#!/usr/bin/env node
// How many inserts a flood of fresh keys needs to evict a blocked victim's state from a full
// table (issue 10, item 3). Runs the real StateTable of a build:
//
//   node bench/eviction-flood.mjs [--trials N] [dist dir, default ./dist]
//
// Table of 10,000 states: 9,999 legitimate keys (1-20 requests each of limit 50, one hour)
// and a victim blocked at limit 100 (one hour). Flood keys: limit 1,000,000, one-year
// window, one request each: the cheapest flood. Stops at 1,000,000 inserts per trial.
import { join, resolve } from 'node:path'
import { RunConditions } from './lib/conditions.mjs'
import { benchOptions } from './lib/options.mjs'

const { values, positionals } = benchOptions(import.meta.url, {
  about: `Inserts a flood of fresh one-request keys needs to evict a blocked victim's state from a full
table of 10,000 (the real StateTable of a build, in-process; stops at 1,000,000 per trial).`,
  options: { trials: { type: 'number', min: 1, default: 5, help: 'trials' } },
  positionals: [{ name: 'dist', help: "a build's dist/ folder", default: './dist' }],
})
const conditions = new RunConditions()
const dist = resolve(positionals[0])
const { StateTable } = await import(join(dist, 'src/shard/table/state-table.js'))
const { newStep } = await import(join(dist, 'src/algorithms/index.js'))
const { fixedWindow } = await import(join(dist, 'src/algorithms/fixed-window.js'))

const T0 = 1_800_000_000_000
const HOUR = 3_600_000
const YEAR = 31_536_000_000
const CAP = 1_000_000
const out = newStep()
const results = []
for (let trial = 0; trial < values.trials; trial++) {
  const table = new StateTable(10_000, T0)
  const hit = (key, limit, d) => table.decide(key, fixedWindow, limit, d, T0, out)
  for (let i = 0; i < 9_999; i++) for (let r = 0; r < 1 + (i % 20); r++) hit(`legit${i}`, 50, HOUR)
  for (let r = 0; r < 100; r++) hit('victim', 100, HOUR)
  let n = 0
  while (table.get('victim') !== undefined && n < CAP) hit(`flood${trial}-${n++}`, 1_000_000, YEAR)
  results.push(table.get('victim') === undefined ? n : `>${CAP}`)
}
console.log(JSON.stringify({ dist, insertsToEvictVictim: results }))
// stdout stays one JSON line; what the run ran under goes to stderr.
conditions.print((s) => process.stderr.write(s))

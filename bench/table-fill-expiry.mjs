#!/usr/bin/env node
// Why a fill of keys of limit 10 an hour can leave almost nothing (docs/durability.md, memory per
// key): in one process, N keys decided once each over S simulated seconds with a sweep every
// 1,000 keys, as bench/memory.mjs's cluster fill did on a loaded machine. A token bucket's state
// goes when it is full again, duration ÷ limit after its one request: only the last 360 s remain.
//   node bench/table-fill-expiry.mjs [keys, default 300000] [seconds, default 900] [duration s, default 3600]
import { join } from 'node:path'
import { benchOptions } from './lib/options.mjs'

const { positionals } = benchOptions(import.meta.url, {
  about: `Why a fill of keys of limit 10 an hour can leave almost nothing: N keys decided once each over
S simulated seconds in one process, with a sweep every 1,000 keys; prints the states left.`,
  options: {},
  positionals: [
    { name: 'keys', help: 'keys to decide once each', default: '300000' },
    { name: 'seconds', help: 'simulated seconds the fill takes', default: '900' },
    { name: 'duration', help: "the keys' duration in seconds (limit 10)", default: '3600' },
  ],
})

const root = join(new URL('.', import.meta.url).pathname, '..', 'dist/src')
const { StateTable } = await import(join(root, 'shard/table/state-table.js'))
const { stateKeyOf, ringKeyOf } = await import(join(root, 'shard/ring/state-key.js'))
const { tokenBucket } = await import(join(root, 'algorithms/token-bucket.js'))
const [keys, seconds, duration] = positionals.map(Number)
for (const [name, v] of [
  ['keys', keys],
  ['seconds', seconds],
  ['duration', duration],
])
  if (!Number.isInteger(v) || v < 1) {
    console.error(`table-fill-expiry.mjs: ${name} must be a whole number ≥ 1`)
    process.exit(2)
  }
const T0 = Date.now()
const table = new StateTable(5_000_000, T0)
const out = {}
for (let i = 0; i < keys; i++) {
  const now = T0 + Math.floor((i * seconds * 1000) / keys)
  table.decide(stateKeyOf(0, duration, ringKeyOf('mem', `k-${i}`)), tokenBucket, 10, duration * 1000, now, out)
  if (i % 1000 === 0) table.sweep(now)
}
table.sweep(T0 + seconds * 1000)
console.log(`${keys} keys of limit 10 per ${duration} s over ${seconds} s: ${table.size} states left`)

#!/usr/bin/env node
// Why a fill of keys of limit 10 an hour can leave almost nothing (docs/durability.md, memory per
// key): in one process, N keys decided once each over S simulated seconds with a sweep every
// 1,000 keys, as bench/memory.mjs's cluster fill did on a loaded machine. A token bucket's state
// goes when it is full again, duration ÷ limit after its one request: only the last 360 s remain.
//   node bench/table-fill-expiry.mjs [keys, default 300000] [seconds, default 900] [duration s, default 3600]
import { join } from 'node:path'

const root = join(new URL('.', import.meta.url).pathname, '..', 'dist/src')
const { StateTable } = await import(join(root, 'shard/table/state-table.js'))
const { stateKeyOf, ringKeyOf } = await import(join(root, 'shard/ring/state-key.js'))
const { tokenBucket } = await import(join(root, 'algorithms/token-bucket.js'))
const keys = Number(process.argv[2] ?? 300000)
const seconds = Number(process.argv[3] ?? 900)
const duration = Number(process.argv[4] ?? 3600)
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

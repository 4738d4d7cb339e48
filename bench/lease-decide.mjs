// The owner's cost of one concurrency decision (LocalDecider.decideKey, in process: no HTTP),
// this build against another's (--baseline DIR, e.g. /work/base2), rounds alternating the two
// builds in one process so that both see the same machine. Rows: many keys (each holds a few
// slots), and one hot key holding slots in every second of its lifetime (the fine lapses'
// worst case: D + 1 entries).
//
//   npm run build && node bench/lease-decide.mjs --baseline /work/base2 [--rounds 3] [--ms 1500]
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { benchOptions } from './lib/options.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `One concurrency decision on the owner (LocalDecider.decideKey), ns per decision, this build
against --baseline in the same process, rounds alternating. Needs the builds (npm run build).`,
  options: {
    baseline: { type: 'string', defaultText: 'none: this build alone', help: 'another built checkout to compare with', arg: 'DIR' },
    rounds: { type: 'number', min: 1, default: 3, help: 'rounds; each runs every row on every build once' },
    ms: { type: 'number', min: 100, default: 1500, help: 'measured wall ms per row, build and round' },
  },
})

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
async function load(dir) {
  const imp = (p) => import(pathToFileURL(path.join(dir, 'dist/src', p)).href)
  const [{ LocalDecider }, { StateTable }, { algorithmByName }] = await Promise.all([
    imp('shard/local/local-decider.js'),
    imp('shard/table/state-table.js'),
    imp('algorithms/index.js'),
  ])
  return { dir, LocalDecider, StateTable, concurrency: algorithmByName('concurrency') }
}
const builds = [await load(here), ...(args.baseline ? [await load(path.resolve(args.baseline))] : [])]

const T0 = 1_800_000_000_000
const rows = {
  // 10,000 keys, D 60 s, limit 1,000,000; the clock advances 1 ms a decision
  'many keys, D 60 s': { keys: 10_000, duration: 60, stepMs: 1 },
  // one key, D 3,600 s: a slot taken every 250 ms of simulated time, so every second holds some
  'hot key, D 3600 s': { keys: 1, duration: 3600, stepMs: 250 },
}

function measure(b, row) {
  // 32 MiB each for released leases and fine lapses (a build before their own lines halves the first: 16 MiB of fine lapses, room for every key either way)
  const local = new b.LocalDecider(new b.StateTable(1_000_000, T0), 32 * 1024 * 1024, undefined, 32 * 1024 * 1024)
  let now = T0
  let n = 0
  // warm-up: fill the keys (and the hot key's lifetime) before the clock starts
  const warm = row.keys === 1 ? (row.duration * 1000) / row.stepMs : row.keys * 5
  for (let i = 0; i < warm; i++, now += row.stepMs) local.decideKey('k' + (i % row.keys), b.concurrency, 1_000_000, row.duration, now, 1)
  const start = process.hrtime.bigint()
  const until = start + BigInt(args.ms) * 1_000_000n
  for (;;) {
    for (let i = 0; i < 1000; i++, n++, now += row.stepMs) {
      const d = local.decideKey('k' + (n % row.keys), b.concurrency, 1_000_000, row.duration, now, 1)
      if (!d.allowed) throw new Error('refused: the bench expects every slot granted')
    }
    if (process.hrtime.bigint() >= until) break
  }
  return Number(process.hrtime.bigint() - start) / n
}

const results = new Map()
for (let r = 0; r < args.rounds; r++)
  for (const [name, row] of Object.entries(rows))
    for (const b of r % 2 === 0 ? builds : [...builds].reverse()) {
      const key = `${name}|${b.dir}`
      results.set(key, [...(results.get(key) ?? []), measure(b, row)])
    }
const median = (xs) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)]
console.log(`${args.rounds} rounds × ${args.ms} ms, medians; this build: ${here}`)
console.log('| row | build | ns per decision | × baseline |\n|:--|:--|--:|--:|')
for (const name of Object.keys(rows)) {
  const base = builds.length > 1 ? median(results.get(`${name}|${builds[1].dir}`)) : undefined
  for (const b of builds) {
    const v = median(results.get(`${name}|${b.dir}`))
    console.log(`| ${name} | ${b.dir} | ${v.toFixed(0)} | ${base ? (v / base).toFixed(2) + '×' : ''} |`)
  }
}

// POST /limit/batch against single requests, and the single-limit path against the floor,
// all in one run: the servers' own CPU time (utime + stime from /proc) per answer, under
// wrk, medians over rounds that alternate the rows.
//
//   node bench/batch.mjs [--rounds 3] [--seconds 8] [--connections 32] [--baseline DIR] [--build DIR]
// (DIR: a checkout built with `npm run build`; --build replaces this one as the build under test)
//
// Rows:
//   floor      uWS: read body, JSON.parse, constant answer (the baseline)
//   single     ringlimit, POST /limit, one limit per request (10 k identifiers, all 200)
//   batch10    ringlimit, POST /limit/batch with 10 limits (10 k identifiers, all 200)
//   baseline   (with --baseline DIR) the same single row on the build in DIR
// Figures: CPU µs per HTTP answer; batch10 / (10 × single) is the cost of a batch of 10
// against 10 single requests; single / floor is the local path's ratio to the floor.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { installCleanup } from './lib/children.mjs'
import { RunConditions } from './lib/conditions.mjs'
import { benchOptions } from './lib/options.mjs'
import { GroupWatch, clockTicks } from './lib/procfs.mjs'
import { median } from './lib/report.mjs'
import { buildMain, makeApiKey, ringlimitMain, startFloor, startRinglimit } from './lib/servers.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `POST /limit/batch (10 limits) against 10 single POST /limit, and the single path against the
floor: the servers' CPU per answer (/proc), under wrk, medians over rounds that alternate the rows.
Needs wrk and the build (npm run build).`,
  options: {
    rounds: { type: 'number', min: 1, default: 3, help: 'rounds; each runs every row once' },
    seconds: { type: 'number', min: 1, default: 8, help: 'measured seconds per row and round' },
    connections: { type: 'number', min: 1, default: 32, help: 'wrk connections' },
    baseline: { type: 'string', arg: 'DIR', defaultText: 'none', help: "also the single row on another checkout's build (DIR/dist/src/main.js)" },
    build: { type: 'string', arg: 'DIR', defaultText: 'this checkout', help: 'the build under test' },
  },
})
const MAIN = args.build ? buildMain(args.build, '--build') : ringlimitMain
const ROUNDS = args.rounds
const SECONDS = args.seconds
const CONNECTIONS = args.connections
installCleanup()
const conditions = new RunConditions()

const apiKey = makeApiKey()
const tmp = mkdtempSync(join(tmpdir(), 'ringlimit-batch-bench-'))

/** A wrk script whose request() returns `perRequest`: bodies with counter-based identifiers. */
function script(name, perRequest) {
  const file = join(tmp, name + '.lua')
  const lua = `
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer ${apiKey}"
local n = math.random(0, 1000000)
local item = function(id) return '{"namespace":"bench","identifier":"' .. id .. '","limit":1000000,"duration":60}' end
request = function()
  n = n + 1
  ${perRequest}
end
`
  writeFileSync(file, lua)
  return file
}

const SINGLE = script('single', `return wrk.format(nil, "/limit", nil, item("u" .. (n % 10000)))`)
const BATCH = script(
  'batch',
  `local parts = {}
  for k = 0, 9 do parts[#parts + 1] = item("b" .. ((n * 10 + k) % 10000)) end
  return wrk.format(nil, "/limit/batch", nil, '{"requests":[' .. table.concat(parts, ",") .. ']}')`,
)

function wrk(url, lua, seconds) {
  const out = execFileSync('wrk', ['-t', '1', '-c', String(CONNECTIONS), '-d', `${seconds}s`, '--latency', '-s', lua, url], { encoding: 'utf8' })
  const requests = Number(/(\d+) requests in/.exec(out)[1])
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0)
  return { requests, non2xx }
}

async function measure(name, server, lua) {
  const url = server.urls[0]
  wrk(url, lua, 2) // warm-up: JIT, keys
  const watch = new GroupWatch(server.pgids)
  const t0 = watch.cpuTicks()
  const wall0 = performance.now()
  const r = wrk(url, lua, SECONDS)
  const cpuSec = (watch.cpuTicks() - t0) / clockTicks()
  conditions.add(name, cpuSec, (performance.now() - wall0) / 1000, 1)
  const cpuUs = cpuSec * 1e6
  if (r.non2xx > 0) throw new Error(`${r.non2xx} answers were not 200`)
  return { usPerAnswer: cpuUs / r.requests, rps: r.requests / SECONDS }
}

const rows = [
  { name: 'floor', start: () => startFloor(), lua: SINGLE },
  { name: 'single', start: () => startRinglimit({ apiKey, main: MAIN }), lua: SINGLE },
  { name: 'batch10', start: () => startRinglimit({ apiKey, main: MAIN }), lua: BATCH },
]
if (args.baseline) {
  const main = buildMain(args.baseline)
  rows.push({ name: 'baseline', start: () => startRinglimit({ apiKey, main }), lua: SINGLE })
}

const results = Object.fromEntries(rows.map((r) => [r.name, []]))
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const row of round % 2 === 0 ? rows : [...rows].reverse()) {
      const server = await row.start()
      try {
        const m = await measure(row.name, server, row.lua)
        results[row.name].push(m)
        console.error(`round ${round + 1} ${row.name}: ${m.usPerAnswer.toFixed(1)} µs CPU per answer, ${Math.round(m.rps)} answers/s`)
      } finally {
        await server.stop()
      }
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true })
}

const med = (name) => median(results[name].map((m) => m.usPerAnswer))
const floor = med('floor')
const single = med('single')
const batch = med('batch10')
console.log(`\nringlimit ${MAIN}, ${ROUNDS} rounds × ${SECONDS} s, wrk 1 thread ${CONNECTIONS} connections, medians`)
console.log('| row | CPU µs per answer | × floor |')
console.log('|:--|--:|--:|')
for (const row of rows) console.log(`| ${row.name} | ${med(row.name).toFixed(1)} | ${(med(row.name) / floor).toFixed(2)}× |`)
console.log(`\nbatch of 10 / 10 single requests: ${(batch / (10 * single)).toFixed(3)}× (target ≤ 0.3×)`)
console.log(`CPU per limit in a batch of 10: ${(batch / 10).toFixed(2)} µs against ${single.toFixed(1)} µs for a single request`)
if (args.baseline) console.log(`single-limit path: ${(single / floor).toFixed(2)}× floor now, ${(med('baseline') / floor).toFixed(2)}× on the baseline build`)
console.log('')
conditions.print()

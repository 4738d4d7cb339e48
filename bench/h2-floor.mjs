// Go/no-go of ringlimit's own HTTP/2 for the gRPC port (src/rls/h2): three constant-answer
// servers in one run, their CPU per call from /proc under h2load (nghttp2-client: a loader
// that is not Node), medians over rounds that alternate the rows.
//
//   node bench/h2-floor.mjs [--rounds 3] [--seconds 6]
//
// Rows, each at two shapes: 4 connections × 50 streams (h2) / 200 connections (HTTP/1.1), and
// 8 connections × 1 stream / 8 connections (what a gateway at moderate load sends):
//   json-floor    servers/floor.mjs: uWebSockets.js, POST /limit, JSON.parse, a constant 200 JSON answer
//   h2-node       servers/grpc-floor.mjs: a constant gRPC answer on node:http2
//   h2-ringlimit  servers/grpc-h2-floor.mjs: the same answer on src/rls/h2 (full HPACK decoding)
// Each gRPC call carries a one-descriptor RateLimitRequest, as bench/rls.mjs sends.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { installCleanup, spawnTracked, stopTracked } from './lib/children.mjs'
import { RunConditions } from './lib/conditions.mjs'
import { freePort } from './lib/net.mjs'
import { benchOptions } from './lib/options.mjs'
import { GroupWatch, clockTicks } from './lib/procfs.mjs'
import { median } from './lib/report.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `Constant-answer servers in one run (uWS JSON, node:http2 gRPC, ringlimit's HTTP/2 gRPC): server CPU
per call under h2load at 4×50 and 8×1, medians over rounds. Needs h2load (apt-get install -y nghttp2-client),
bench/node_modules (npm ci --prefix bench) and the build (npm run build).`,
  options: {
    rounds: { type: 'number', min: 1, default: 3, help: 'rounds; each runs every row once, alternating their order' },
    seconds: { type: 'number', min: 1, default: 6, help: 'measured seconds per row and round, after 2 s of warm-up' },
  },
})
const ROUNDS = Math.floor(args.rounds)
const SECONDS = Math.floor(args.seconds)
installCleanup()

const tmp = mkdtempSync(join(tmpdir(), 'ringlimit-h2-floor-'))
const jsonBody = join(tmp, 'limit.json')
const grpcBody = join(tmp, 'rls1.bin')
writeFileSync(jsonBody, JSON.stringify({ namespace: 'bench', identifier: 'u0', limit: 1_000_000, duration: 1 }))
// domain "bench", one descriptor user=u0 with its own limit (bench/rls.mjs's body)
const message = Buffer.from('0a0562656e636812140a0a0a047573657212027530120608c0843d1001', 'hex')
const head = Buffer.alloc(5)
head.writeUInt32BE(message.length, 1)
writeFileSync(grpcBody, Buffer.concat([head, message]))

const SERVERS = { 'json-floor': 'floor.mjs', 'h2-node': 'grpc-floor.mjs', 'h2-ringlimit': 'grpc-h2-floor.mjs' }
const SHAPES = [
  { name: '4×50', connections: 4, streams: 50 },
  { name: '8×1', connections: 8, streams: 1 },
]

function h2load(row, port, shape, seconds) {
  const argv = ['-D', String(seconds)]
  if (row === 'json-floor') {
    argv.push(
      '--h1',
      '-c',
      String(shape.connections * shape.streams),
      '-m',
      '1',
      '-d',
      jsonBody,
      '-H',
      'content-type: application/json',
      `http://127.0.0.1:${port}/limit`,
    )
  } else {
    argv.push('-c', String(shape.connections), '-m', String(shape.streams), '-d', grpcBody, '-H', 'content-type: application/grpc', '-H', 'te: trailers')
    argv.push(`http://127.0.0.1:${port}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`)
  }
  const out = execFileSync('h2load', argv, { encoding: 'utf8', maxBuffer: 1 << 26 })
  const m = /requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded/.exec(out)
  if (!m || m[1] !== m[2]) throw new Error(`${row}: h2load:\n${out}`)
  return Number(m[2])
}

async function measure(row, shape, conditions) {
  const port = await freePort()
  const rec = spawnTracked(row, process.execPath, [new URL(`./servers/${SERVERS[row]}`, import.meta.url).pathname], { env: { PORT: String(port) } })
  try {
    for (let i = 0; ; i++) {
      try {
        h2load(row, port, { connections: 1, streams: 1 }, 1)
        break
      } catch (err) {
        if (i === 50) throw err
        await new Promise((r) => setTimeout(r, 100))
      }
    }
    h2load(row, port, shape, 2) // warm-up
    const watch = new GroupWatch([rec.pid])
    const t0 = watch.cpuTicks()
    const done = h2load(row, port, shape, SECONDS)
    const cpuSec = (watch.cpuTicks() - t0) / clockTicks()
    conditions.add(`${row} ${shape.name}`, cpuSec, SECONDS, 1)
    return { usPerCall: (cpuSec * 1e6) / done, perSecond: done / SECONDS }
  } finally {
    await stopTracked(rec)
  }
}

const conditions = new RunConditions()
const rows = Object.keys(SERVERS)
const results = {}
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const shape of SHAPES) {
      const perRound = {}
      for (const row of round % 2 === 0 ? rows : [...rows].reverse()) {
        const m = await measure(row, shape, conditions)
        perRound[row] = m
        ;(results[`${row} ${shape.name}`] ??= []).push(m)
        console.error(`round ${round + 1} ${shape.name} ${row}: ${m.usPerCall.toFixed(1)} µs CPU per call, ${Math.round(m.perSecond)} calls/s`)
      }
      for (const row of rows) (results[`${row} ${shape.name} ratio`] ??= []).push(perRound[row].usPerCall / perRound['json-floor'].usPerCall)
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true })
}

console.log(`\n${ROUNDS} rounds × ${SECONDS} s, h2load, medians; ratio: to json-floor in the same round, median of the rounds`)
console.log('| shape | row | CPU µs per call | calls/s | × json-floor |')
console.log('|:--|:--|--:|--:|--:|')
for (const shape of SHAPES)
  for (const row of rows) {
    const key = `${row} ${shape.name}`
    console.log(
      `| ${shape.name} | ${row} | ${median(results[key].map((m) => m.usPerCall)).toFixed(1)} | ${Math.round(median(results[key].map((m) => m.perSecond)))} | ${median(results[`${key} ratio`]).toFixed(2)} |`,
    )
  }
console.log()
conditions.print()

// Envoy's rate limit service (gRPC, RLS v3) against POST /limit, in one run: the server's own
// CPU time (utime + stime from /proc) per decision, under h2load (nghttp2-client: a loader
// that is not Node, so the server's CPU is the server's), medians over rounds that alternate
// the rows, and the latency of each call (p50/p99) at the given number of streams.
//
//   node bench/rls.mjs [--rounds 3] [--seconds 8] [--streams 50] [--build DIR] [--baseline DIR]
//
// Rows (one node each, fresh per round; every answer allowed):
//   limit   POST /limit over HTTP/1.1, one key, `--streams` connections
//   h2floor bench/servers/grpc-floor.mjs: a constant gRPC answer on node:http2, the floor of
//           any gRPC server on Node's HTTP/2 (@grpc/grpc-js included)
//   rls1    ShouldRateLimit with one descriptor (its own limit: no policy needed), one HTTP/2
//           connection carrying `--streams` concurrent calls, as Envoy keeps one per upstream
//   rls3    the same with three descriptors
//   rls1-baseline  (with --baseline DIR) rls1 on the build in DIR
// Targets: rls1 ≤ 1.5 × limit; rls3 ≤ 2 × rls1. h2floor / limit says how much of rls1 is
// HTTP/2 in Node before any RLS work.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import http2 from 'node:http2'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { installCleanup, stopTracked } from './lib/children.mjs'
import { benchOptions } from './lib/options.mjs'
import { freePort, waitReady } from './lib/net.mjs'
import { GroupWatch, clockTicks } from './lib/procfs.mjs'
import { median } from './lib/report.mjs'
import { buildMain, makeApiKey, ringlimitMain, spawnNode } from './lib/servers.mjs'
import { spawnTracked } from './lib/children.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `Envoy's rate limit service (gRPC) against POST /limit in one run: server CPU per decision
under h2load, medians over rounds, p50/p99 per row. Needs h2load (Debian: apt-get install -y
nghttp2-client) and the build (npm run build).`,
  options: {
    rounds: { type: 'number', min: 1, default: 3, help: 'rounds; each runs every row once, alternating their order' },
    seconds: { type: 'number', min: 1, default: 8, help: 'measured seconds per row and round, after 2 s of warm-up' },
    streams: { type: 'number', min: 1, default: 50, help: 'concurrent calls: HTTP/1.1 connections for /limit, HTTP/2 streams for RLS' },
    build: { type: 'string', arg: 'DIR', defaultText: 'this checkout', help: 'measure the build in DIR (a checkout built with npm run build)' },
    baseline: { type: 'string', arg: 'DIR', defaultText: 'no baseline row', help: 'add a row rls1-baseline: one descriptor on the build in DIR' },
  },
})
const ROUNDS = Math.floor(args.rounds)
const SECONDS = Math.floor(args.seconds)
const STREAMS = Math.floor(args.streams)
const MAIN = args.build ? buildMain(args.build, '--build') : ringlimitMain
const BASELINE = args.baseline ? buildMain(args.baseline) : undefined
try {
  execFileSync('h2load', ['--version'], { stdio: 'ignore' })
} catch {
  process.stderr.write('bench/rls.mjs: h2load not found (Debian: apt-get install -y nghttp2-client)\n')
  process.exit(2)
}
installCleanup()

// --- protobuf, by hand: the few fields of a RateLimitRequest (src/rls/wire/proto) ---
const varint = (n) => {
  const out = []
  while (n > 127) {
    out.push((n & 127) | 128)
    n >>>= 7
  }
  out.push(n)
  return Buffer.from(out)
}
const field = (number, bytes) => Buffer.concat([varint((number << 3) | 2), varint(bytes.length), bytes])
const uintField = (number, n) => Buffer.concat([varint(number << 3), varint(n)])
const str = (number, s) => field(number, Buffer.from(s))
/** A descriptor `user=<value>` with its own limit: 1,000,000 per second, never reached here. */
const descriptor = (value) =>
  field(2, Buffer.concat([field(1, Buffer.concat([str(1, 'user'), str(2, value)])), field(2, Buffer.concat([uintField(1, 1_000_000), uintField(2, 1)]))]))
/** A gRPC message: 1 byte "not compressed", 4 bytes of length, the message. */
const framed = (message) => {
  const head = Buffer.alloc(5)
  head.writeUInt32BE(message.length, 1)
  return Buffer.concat([head, message])
}
const rlsBody = (n) => framed(Buffer.concat([str(1, 'bench'), ...Array.from({ length: n }, (_, i) => descriptor(`u${i}`))]))

const apiKey = makeApiKey()
const tmp = mkdtempSync(join(tmpdir(), 'ringlimit-rls-bench-'))
const files = {
  limit: join(tmp, 'limit.json'),
  rls1: join(tmp, 'rls1.bin'),
  rls3: join(tmp, 'rls3.bin'),
}
writeFileSync(files.limit, JSON.stringify({ namespace: 'bench', identifier: 'u0', limit: 1_000_000, duration: 1 }))
writeFileSync(files.rls1, rlsBody(1))
writeFileSync(files.rls3, rlsBody(3))

async function startNode(main = MAIN) {
  const port = await freePort()
  const grpcPort = await freePort()
  const rec = spawnNode('ringlimit', { PORT: String(port), PEER_PORT: String(await freePort()), GRPC_PORT: String(grpcPort), API_KEYS: apiKey }, { main })
  await waitReady(`http://127.0.0.1:${port}/ready`, rec)
  return { rec, port, grpcPort, stop: () => stopTracked(rec) }
}

async function startFloor() {
  const grpcPort = await freePort()
  const rec = spawnTracked('grpc-floor', process.execPath, [new URL('./servers/grpc-floor.mjs', import.meta.url).pathname], {
    env: { PORT: String(grpcPort), HOST: '127.0.0.1' },
  })
  for (let tries = 0; ; tries++) {
    try {
      await preflight(grpcPort, readFileSync(files.rls1))
      break
    } catch (err) {
      if (tries === 100 || rec.exitCode !== undefined) throw new Error(`grpc-floor did not start: ${err.message} ${rec.err}`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  return { rec, grpcPort, stop: () => stopTracked(rec) }
}

/** One call through node:http2 before the load: the body is answered grpc-status 0, every descriptor OK. */
function preflight(grpcPort, body) {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${grpcPort}`)
    session.on('error', reject)
    const req = session.request({
      ':method': 'POST',
      ':path': '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
      'content-type': 'application/grpc',
      te: 'trailers',
      authorization: `Bearer ${apiKey}`,
    })
    const chunks = []
    req.on('error', reject)
    req.on('data', (c) => chunks.push(c))
    req.on('trailers', (trailers) => {
      const answer = Buffer.concat(chunks)
      session.close()
      // overall_code (field 1, varint) OK = 1: bytes 0x08 0x01 right after the 5-byte frame head
      if (trailers['grpc-status'] !== '0' || answer[5] !== 0x08 || answer[6] !== 0x01)
        reject(new Error(`preflight: grpc-status ${trailers['grpc-status']} ${trailers['grpc-message'] ?? ''}`))
      else resolve()
    })
    req.end(body)
  })
}

function h2load(row, node, seconds, logFile) {
  const common = ['-D', String(seconds), '-d', files[row === 'limit' || row === 'rls3' ? row : 'rls1']]
  const argv =
    row === 'limit'
      ? [
          ...common,
          '--h1',
          '-c',
          String(STREAMS),
          '-m',
          '1',
          '-H',
          'content-type: application/json',
          '-H',
          `authorization: Bearer ${apiKey}`,
          `http://127.0.0.1:${node.port}/limit`,
        ]
      : [
          ...common,
          '-c',
          '1',
          '-m',
          String(STREAMS),
          '-H',
          'content-type: application/grpc',
          '-H',
          'te: trailers',
          '-H',
          `authorization: Bearer ${apiKey}`,
          `http://127.0.0.1:${node.grpcPort}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`,
        ]
  if (logFile) argv.unshift(`--log-file=${logFile}`)
  const out = execFileSync('h2load', argv, { encoding: 'utf8', maxBuffer: 1 << 26 })
  const m = /requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(out)
  const status = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out)
  if (!m || !status) throw new Error(`h2load output not understood:\n${out}`)
  return { done: Number(m[1]), failed: Number(m[3]) + Number(m[4]) + Number(status[3]) + Number(status[4]) }
}

/** p50 and p99 in ms from h2load's log: `start (µs)\tstatus\tduration (µs)` per request. */
function percentiles(logFile) {
  const us = readFileSync(logFile, 'utf8')
    .trim()
    .split('\n')
    .map((line) => Number(line.split('\t')[2]))
    .filter(Number.isFinite)
    .sort((a, b) => a - b)
  const at = (q) => us[Math.min(us.length - 1, Math.floor(q * us.length))] / 1000
  return { p50: at(0.5), p99: at(0.99) }
}

async function measure(row) {
  const node = row === 'h2floor' ? await startFloor() : await startNode(row === 'rls1-baseline' ? BASELINE : MAIN)
  try {
    if (row.startsWith('rls')) await preflight(node.grpcPort, readFileSync(files[row === 'rls3' ? 'rls3' : 'rls1']))
    h2load(row, node, 2) // warm-up: JIT, connections
    const watch = new GroupWatch([node.rec.pid])
    const t0 = watch.cpuTicks()
    const log = join(tmp, `${row}.log`)
    const r = h2load(row, node, SECONDS, log)
    const cpuUs = ((watch.cpuTicks() - t0) / clockTicks()) * 1e6
    if (r.failed > 0) throw new Error(`${row}: ${r.failed} calls failed`)
    return { usPerCall: cpuUs / r.done, perSecond: r.done / SECONDS, ...percentiles(log) }
  } finally {
    await node.stop()
  }
}

const ROWS = ['limit', 'h2floor', 'rls1', 'rls3', ...(BASELINE ? ['rls1-baseline'] : [])]
const results = Object.fromEntries(ROWS.map((r) => [r, []]))
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const row of round % 2 === 0 ? ROWS : [...ROWS].reverse()) {
      const m = await measure(row)
      results[row].push(m)
      console.error(
        `round ${round + 1} ${row}: ${m.usPerCall.toFixed(1)} µs CPU per call, ${Math.round(m.perSecond)} calls/s, p50 ${m.p50.toFixed(2)} ms, p99 ${m.p99.toFixed(2)} ms`,
      )
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true })
}

const med = (row, f) => median(results[row].map((m) => m[f]))
console.log(`\nringlimit ${MAIN}, ${ROUNDS} rounds × ${SECONDS} s, h2load, ${STREAMS} concurrent calls, medians`)
console.log('| row | CPU µs per call | calls/s | p50 ms | p99 ms |')
console.log('|:--|--:|--:|--:|--:|')
for (const row of ROWS) {
  console.log(
    `| ${row} | ${med(row, 'usPerCall').toFixed(1)} | ${Math.round(med(row, 'perSecond'))} | ${med(row, 'p50').toFixed(2)} | ${med(row, 'p99').toFixed(2)} |`,
  )
}
const limit = med('limit', 'usPerCall')
const one = med('rls1', 'usPerCall')
const three = med('rls3', 'usPerCall')
console.log(`\none descriptor / one POST /limit decision: ${(one / limit).toFixed(2)}× (target ≤ 1.5×)`)
console.log(`three descriptors / one descriptor: ${(three / one).toFixed(2)}× (target ≤ 2×)`)
if (BASELINE) console.log(`one descriptor, this build / the baseline build: ${(one / med('rls1-baseline', 'usPerCall')).toFixed(2)}×`)
console.log(`node:http2 floor (constant gRPC answer) / one POST /limit decision: ${(med('h2floor', 'usPerCall') / limit).toFixed(2)}×`)

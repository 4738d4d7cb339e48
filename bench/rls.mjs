// Envoy's rate limit service (gRPC, RLS v3) against POST /limit, in one run: the server's own
// CPU time (utime + stime from /proc) per decision, under h2load (nghttp2-client: a loader
// that is not Node, so the server's CPU is the server's), medians over rounds that alternate
// the rows, and the latency of each call (p50/p99) at the given number of streams.
//
//   node bench/rls.mjs [--rounds 3] [--seconds 8] [--connections 1] [--streams 50] [--build DIR] [--baseline DIR]
//
// Rows (one node each, fresh per round; every answer allowed):
//   limit   POST /limit over HTTP/1.1, one key, `--connections` × `--streams` connections
//   h2floor bench/servers/grpc-floor.mjs: a constant gRPC answer on node:http2, the floor of
//           any gRPC server on Node's HTTP/2 (@grpc/grpc-js included)
//   h2floor-ringlimit  bench/servers/grpc-h2-floor.mjs: the same answer on src/rls/h2
//   rls1    ShouldRateLimit with one descriptor (its own limit: no policy needed) on the gRPC
//           port's default server (src/rls/h2), `--connections` HTTP/2 connections each carrying
//           `--streams` concurrent calls (Envoy keeps one per upstream; 1 stream is a gateway at
//           moderate load)
//   rls1-node  the same with GRPC_SERVER_IMPL=node-http2 (the fallback)
//   rls3    the same with three descriptors
//   rls1-service3  3 nodes behind a round-robin Service, defaults (REPLICAS=2): one HTTP/2
//           connection per node (Envoy's one per upstream host) carrying a third of the streams,
//           each with its own descriptor, so about 2 in 3 calls are decided on another node
//           (the forwarded share is printed); CPU of all three nodes per call
//   rls1-check     Envoy's first call of an LLM request (docs/envoy.md, Token budgets): one
//           descriptor with hits_addend 0, a check that counts nothing
//   rls1-charge    its second call: the same descriptor with hits_addend 500 (the tokens),
//           counted past the limit too (debt); check + charge is the two-call flow's price
//   rls1-w2        rls1 on a node with WORKERS=2: the gRPC door in two worker threads, each
//           call resolved and decided on the state owner (one postMessage each way); give
//           --connections 2 or more, as the kernel spreads connections, not calls, over them
//   rls1-baseline  (with --baseline DIR) rls1 on the build in DIR
// Targets: rls1 ≤ 1.5 × limit; rls3 ≤ 2 × rls1. h2floor / limit says how much of rls1 is
// HTTP/2 in Node before any RLS work.
import { execFile, execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import http2 from 'node:http2'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { installCleanup, stopTracked } from './lib/children.mjs'
import { benchOptions } from './lib/options.mjs'
import { freePort, get, waitReady } from './lib/net.mjs'
import { GroupWatch, clockTicks } from './lib/procfs.mjs'
import { median } from './lib/report.mjs'
import { loadavg } from 'node:os'

const loadAtStart = loadavg()
const loadLine = () =>
  console.log(
    `load average (1, 5, 15 min): ${loadAtStart.map((x) => x.toFixed(2)).join(' ')} at the start, ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')} at the end`,
  )
import { buildMain, makeApiKey, ringlimitMain, spawnNode } from './lib/servers.mjs'
import { spawnTracked } from './lib/children.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `Envoy's rate limit service (gRPC) against POST /limit in one run: server CPU per decision
under h2load, medians over rounds, p50/p99 per row. Needs h2load (Debian: apt-get install -y
nghttp2-client) and the build (npm run build).`,
  options: {
    rounds: { type: 'number', min: 1, default: 3, help: 'rounds; each runs every row once, alternating their order' },
    seconds: { type: 'number', min: 1, default: 8, help: 'measured seconds per row and round, after 2 s of warm-up' },
    connections: { type: 'number', min: 1, default: 1, help: 'HTTP/2 connections per RLS row (the Service row: one per node)' },
    streams: { type: 'number', min: 1, default: 50, help: 'concurrent calls per HTTP/2 connection; /limit gets connections × streams HTTP/1.1 connections' },
    build: { type: 'string', arg: 'DIR', defaultText: 'this checkout', help: 'measure the build in DIR (a checkout built with npm run build)' },
    baseline: { type: 'string', arg: 'DIR', defaultText: 'no baseline row', help: 'add a row rls1-baseline: one descriptor on the build in DIR' },
    only: {
      type: 'string',
      arg: 'ROWS',
      defaultText: 'every row',
      help: 'a comma-separated list of the rows to run (limit is always run: the ratios divide by it)',
    },
  },
})
const ROUNDS = Math.floor(args.rounds)
const SECONDS = Math.floor(args.seconds)
const STREAMS = Math.floor(args.streams)
const CONNECTIONS = Math.floor(args.connections)
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
/** One descriptor with its own hits_addend (field 3, a google.protobuf.UInt64Value): 0 a check, more a charge. */
const hitsBody = (hits) =>
  framed(
    Buffer.concat([
      str(1, 'bench'),
      field(
        2,
        Buffer.concat([
          field(1, Buffer.concat([str(1, 'user'), str(2, 'tokens')])),
          field(2, Buffer.concat([uintField(1, 1_000_000), uintField(2, 1)])),
          field(3, hits === 0 ? Buffer.alloc(0) : uintField(1, hits)),
        ]),
      ),
    ]),
  )

const apiKey = makeApiKey()
const tmp = mkdtempSync(join(tmpdir(), 'ringlimit-rls-bench-'))
const files = {
  limit: join(tmp, 'limit.json'),
  rls1: join(tmp, 'rls1.bin'),
  rls3: join(tmp, 'rls3.bin'),
  'rls1-check': join(tmp, 'rls1-check.bin'),
  'rls1-charge': join(tmp, 'rls1-charge.bin'),
}
writeFileSync(files.limit, JSON.stringify({ namespace: 'bench', identifier: 'u0', limit: 1_000_000, duration: 1 }))
writeFileSync(files.rls1, rlsBody(1))
writeFileSync(files.rls3, rlsBody(3))
writeFileSync(files['rls1-check'], hitsBody(0))
writeFileSync(files['rls1-charge'], hitsBody(500))

async function startNode(main = MAIN, env = {}) {
  const port = await freePort()
  const grpcPort = await freePort()
  const rec = spawnNode(
    'ringlimit',
    { PORT: String(port), PEER_PORT: String(await freePort()), GRPC_PORT: String(grpcPort), API_KEYS: apiKey, ...env },
    { main },
  )
  await waitReady(`http://127.0.0.1:${port}/ready`, rec)
  return { rec, port, grpcPort, stop: () => stopTracked(rec) }
}

/** Three nodes with the defaults (REPLICAS=2), each with its gRPC port: a cluster behind a Service. */
async function startService3(main = MAIN) {
  const ports = []
  for (let i = 0; i < 3; i++) ports.push({ port: await freePort(), grpcPort: await freePort(), peer: await freePort() })
  const peers = ports.map((p) => `127.0.0.1:${p.peer}`).join(',')
  const secret = randomBytes(32).toString('hex')
  const recs = ports.map((p) =>
    spawnNode(
      'ringlimit',
      {
        PORT: String(p.port),
        PEER_HOST: '127.0.0.1',
        PEER_PORT: String(p.peer),
        GRPC_PORT: String(p.grpcPort),
        API_KEYS: apiKey,
        PEERS: peers,
        CLUSTER_SECRET: secret,
      },
      { main },
    ),
  )
  await Promise.all(ports.map((p, i) => waitReady(`http://127.0.0.1:${p.port}/ready`, recs[i])))
  // Until every node has all three on its ring.
  for (let t = 0; ; t++) {
    const text = await Promise.all(ports.map((p) => get(`http://127.0.0.1:${p.port}/metrics`).then((r) => r.body)))
    if (text.every((m) => m.includes('ringlimit_ring_members 3'))) break
    if (t > 300) throw new Error('rls1-service3: the cluster did not form')
    await new Promise((r) => setTimeout(r, 100))
  }
  return { recs, nodes: ports, stop: () => Promise.all(recs.map((r) => stopTracked(r))) }
}
/** Sum over `ports`' /metrics of the series starting with `name`. */
async function metricSum(ports, name) {
  let sum = 0
  for (const p of ports)
    for (const line of (await get(`http://127.0.0.1:${p}/metrics`)).body.split('\n')) if (line.startsWith(name)) sum += Number(line.split(' ').at(-1))
  return sum
}

async function startFloor(script) {
  const grpcPort = await freePort()
  const rec = spawnTracked('grpc-floor', process.execPath, [new URL(`./servers/${script}`, import.meta.url).pathname], {
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

function h2load(row, node, seconds, logFile, streams = STREAMS, body = files[row in files ? row : 'rls1']) {
  const common = ['-D', String(seconds), '-d', body]
  const argv =
    row === 'limit'
      ? [
          ...common,
          '--h1',
          '-c',
          String(CONNECTIONS * STREAMS),
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
          String(CONNECTIONS),
          '-m',
          String(streams),
          '-H',
          'content-type: application/grpc',
          '-H',
          'te: trailers',
          '-H',
          `authorization: Bearer ${apiKey}`,
          `http://127.0.0.1:${node.grpcPort}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`,
        ]
  if (logFile) argv.unshift(`--log-file=${logFile}`)
  return h2loadResult(execFileSync('h2load', argv, { encoding: 'utf8', maxBuffer: 1 << 26 }))
}

/** h2load's summary: calls done and failed. */
function h2loadResult(out) {
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

/** rls1-service3: one h2load per node at once (each its own descriptor), CPU of the three nodes. */
async function measureService3() {
  const cluster = await startService3()
  try {
    const bodies = cluster.nodes.map((_, i) => {
      const file = join(tmp, `service3-${i}.bin`)
      writeFileSync(file, framed(Buffer.concat([str(1, 'bench'), descriptor(`svc${i}`)])))
      return file
    })
    for (const [i, n] of cluster.nodes.entries()) await preflight(n.grpcPort, readFileSync(bodies[i]))
    const each = Math.max(1, Math.round(STREAMS / 3))
    const run = (seconds, log) =>
      Promise.all(
        cluster.nodes.map(
          (n, i) =>
            new Promise((resolve, reject) => {
              const argv = ['-D', String(seconds), '-d', bodies[i], '-c', '1', '-m', String(each), '-H', 'content-type: application/grpc', '-H', 'te: trailers']
              argv.push('-H', `authorization: Bearer ${apiKey}`, `http://127.0.0.1:${n.grpcPort}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`)
              if (log) argv.unshift(`--log-file=${log}-${i}`)
              execFile('h2load', argv, { encoding: 'utf8', maxBuffer: 1 << 26 }, (err, out) => (err ? reject(err) : resolve(h2loadResult(out))))
            }),
        ),
      )
    await run(2) // warm-up
    const httpPorts = cluster.nodes.map((n) => n.port)
    const fwd0 = await metricSum(httpPorts, 'ringlimit_forwarded_total')
    const watch = new GroupWatch(cluster.recs.map((r) => r.pid))
    const t0 = watch.cpuTicks()
    const log = join(tmp, 'service3.log')
    const parts = await run(SECONDS, log)
    const cpuUs = ((watch.cpuTicks() - t0) / clockTicks()) * 1e6
    const done = parts.reduce((a, p) => a + p.done, 0)
    if (parts.some((p) => p.failed > 0)) throw new Error('rls1-service3: calls failed')
    const forwarded = (await metricSum(httpPorts, 'ringlimit_forwarded_total')) - fwd0
    // p50 / p99 over the three logs together.
    for (let i = 1; i < 3; i++) writeFileSync(`${log}-0`, readFileSync(`${log}-${i}`), { flag: 'a' })
    return { usPerCall: cpuUs / done, perSecond: done / SECONDS, forwarded: forwarded / done, ...percentiles(`${log}-0`) }
  } finally {
    await cluster.stop()
  }
}

async function measure(row) {
  if (row === 'rls1-service3') return measureService3()
  const node =
    row === 'h2floor'
      ? await startFloor('grpc-floor.mjs')
      : row === 'h2floor-ringlimit'
        ? await startFloor('grpc-h2-floor.mjs')
        : await startNode(
            row === 'rls1-baseline' ? BASELINE : MAIN,
            row === 'rls1-node' ? { GRPC_SERVER_IMPL: 'node-http2' } : row === 'rls1-w2' ? { WORKERS: '2' } : {},
          )
  try {
    // The charge's preflight is a check: the charges make its key over, as they should.
    if (row.startsWith('rls')) await preflight(node.grpcPort, readFileSync(files[row === 'rls1-charge' ? 'rls1-check' : row in files ? row : 'rls1']))
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

const ALL_ROWS = [
  'limit',
  'h2floor',
  'h2floor-ringlimit',
  'rls1',
  'rls1-node',
  'rls1-w2',
  'rls3',
  'rls1-service3',
  'rls1-check',
  'rls1-charge',
  ...(BASELINE ? ['rls1-baseline'] : []),
]
const ROWS = args.only ? ALL_ROWS.filter((r) => r === 'limit' || args.only.split(',').includes(r)) : ALL_ROWS
const results = Object.fromEntries(ROWS.map((r) => [r, []]))
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const row of round % 2 === 0 ? ROWS : [...ROWS].reverse()) {
      const m = await measure(row)
      results[row].push(m)
      console.error(
        `round ${round + 1} ${row}: ${m.usPerCall.toFixed(1)} µs CPU per call, ${Math.round(m.perSecond)} calls/s, p50 ${m.p50.toFixed(2)} ms, p99 ${m.p99.toFixed(2)} ms` +
          (m.forwarded === undefined ? '' : `, ${(100 * m.forwarded).toFixed(0)} % forwarded`),
      )
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true })
}

// NaN for a row --only left out, so a ratio that needs it prints NaN instead of throwing after the table
const med = (row, f) => (results[row] ? median(results[row].map((m) => m[f])) : NaN)
console.log(`\nringlimit ${MAIN}, ${ROUNDS} rounds × ${SECONDS} s, h2load, ${CONNECTIONS} connection(s) × ${STREAMS} streams, medians`)
console.log('| row | CPU µs per call | calls/s | p50 ms | p99 ms |')
console.log('|:--|--:|--:|--:|--:|')
for (const row of ROWS) {
  console.log(
    `| ${row} | ${med(row, 'usPerCall').toFixed(1)} | ${Math.round(med(row, 'perSecond'))} | ${med(row, 'p50').toFixed(2)} | ${med(row, 'p99').toFixed(2)} |`,
  )
}
const limit = med('limit', 'usPerCall')
const has = (row) => ROWS.includes(row)
const one = has('rls1') ? med('rls1', 'usPerCall') : NaN
if (has('rls1')) console.log(`\none descriptor / one POST /limit decision: ${(one / limit).toFixed(2)}× (target ≤ 1.5×)`)
if (has('rls3')) console.log(`three descriptors / one descriptor: ${(med('rls3', 'usPerCall') / one).toFixed(2)}× (target ≤ 2×)`)
if (has('rls1-service3'))
  console.log(
    `3 nodes behind a round-robin Service (defaults, REPLICAS=2), all nodes' CPU / one node's, one descriptor: ${(med('rls1-service3', 'usPerCall') / one).toFixed(2)}× (${(100 * med('rls1-service3', 'forwarded')).toFixed(0)} % forwarded)`,
  )
if (has('rls1-check') && has('rls1-charge')) {
  const check = med('rls1-check', 'usPerCall')
  const charge = med('rls1-charge', 'usPerCall')
  console.log(
    `token budget, a check (hits_addend 0) / one POST /limit decision: ${(check / limit).toFixed(2)}×; a charge (hits_addend 500): ${(charge / limit).toFixed(2)}×`,
  )
  console.log(`the two-call flow (check + charge) per LLM request / one POST /limit decision: ${((check + charge) / limit).toFixed(2)}×`)
}
if (has('rls1') && has('rls1-w2'))
  console.log(`one descriptor, WORKERS=2 / WORKERS=1 (server CPU per call): ${(med('rls1-w2', 'usPerCall') / one).toFixed(2)}× (issue #40's target ≤ 1.15×)`)
if (BASELINE) console.log(`one descriptor, this build / the baseline build: ${(one / med('rls1-baseline', 'usPerCall')).toFixed(2)}×`)
if (has('h2floor')) console.log(`node:http2 floor (constant gRPC answer) / one POST /limit decision: ${(med('h2floor', 'usPerCall') / limit).toFixed(2)}×`)
if (has('h2floor-ringlimit'))
  console.log(`src/rls/h2 floor (constant gRPC answer) / one POST /limit decision: ${(med('h2floor-ringlimit', 'usPerCall') / limit).toFixed(2)}×`)
if (has('rls1-node'))
  console.log(
    `one descriptor on node:http2 (GRPC_SERVER_IMPL=node-http2) / one POST /limit decision: ${(med('rls1-node', 'usPerCall') / limit).toFixed(2)}×; / its floor: ${(med('rls1-node', 'usPerCall') / med('h2floor', 'usPerCall')).toFixed(2)}×`,
  )
if (has('rls1') && has('h2floor-ringlimit'))
  console.log(`one descriptor on src/rls/h2 / its floor: ${(one / med('h2floor-ringlimit', 'usPerCall')).toFixed(2)}×`)
loadLine()

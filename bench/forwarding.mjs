// Cost of forwarding (issue 3): added latency of a forwarded decision, and total CPU of
// all nodes per decision when about half the decisions are forwarded, against one node
// deciding everything locally. Same run, same machine, ratios.
//
//   npm run build && node bench/forwarding.mjs [--seconds 8] [--rounds 3] [--baseline DIR]
//
// --baseline DIR: also run a 2-node cluster from another build (a checkout built with
// `npm run build`, see buildMain in lib/servers.mjs) and measure it in the same rounds,
// alternating, so the two builds are compared on the same machine at the same time.
//
// Needs wrk (apt-get install wrk). Servers: one standalone node, and a 2-node cluster
// driven on both nodes at once, so each node forwards the keys the other owns (~50%).
import { randomBytes } from 'node:crypto'
import { writeFileSync, mkdtempSync } from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { installCleanup, killAllSync, spawnTracked } from './lib/children.mjs'
import { RunConditions } from './lib/conditions.mjs'
import { freePort, get, waitFor } from './lib/net.mjs'
import { benchOptions } from './lib/options.mjs'
import { clockTicks, cpuTicks } from './lib/procfs.mjs'
import { buildMain, spawnNode } from './lib/servers.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `Cost of forwarding: the latency a forwarded decision adds, and all nodes' CPU per decision
when about half are forwarded (2-node cluster) against one node deciding everything locally.
Needs wrk and the build (npm run build).`,
  options: {
    seconds: { type: 'number', min: 1, default: 8, help: 'measured seconds per row and round' },
    rounds: { type: 'number', min: 1, default: 3, help: 'rounds; each runs every row once' },
    baseline: { type: 'string', arg: 'DIR', defaultText: 'none', help: "also a 2-node cluster of another checkout's build (DIR/dist/src/main.js)" },
    replicas: {
      type: 'number',
      min: 1,
      default: 1,
      help: 'REPLICAS of the 2-node clusters (2 is the default a user runs: each decision also replicated to the other node)',
    },
  },
})
const SECONDS = args.seconds
const ROUNDS = args.rounds
const BASELINE = args.baseline
const { HashRing } = await import('../dist/src/shard/ring/ring.js')
const { ringKeyOf } = await import('../dist/src/shard/ring/state-key.js')
const KEY = 'svc_sk_' + 'f'.repeat(40)
const SECRET = randomBytes(32).toString('base64url')
const TICK = clockTicks()
const dir = mkdtempSync(path.join(os.tmpdir(), 'ringlimit-fwd-'))
const lua = path.join(dir, 'post.lua')
writeFileSync(
  lua,
  `wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer ${KEY}"
local n = math.random(1, 100000)
request = function()
  n = n + 1
  return wrk.format(nil, "/limit", nil, '{"namespace":"bench","identifier":"user-' .. (n % 10000) .. '","limit":1000000,"duration":60}')
end
`,
)

installCleanup()
const conditions = new RunConditions()

// REPLICAS=1 unless --replicas: this bench prices forwarding; with the default (2 with peers)
// every decision is also replicated to the other node, which bench/replication.mjs prices, and
// a --baseline build from before replicas would be compared against less work.
const start = (env, main) => spawnNode('ringlimit', { API_KEYS: KEY, REPLICAS: String(args.replicas), ...env }, { main })
/** Until the node at `port` answers /metrics and, given `members`, has that many on its ring. */
const ready = (port, members) =>
  waitFor(async () => {
    const m = await get(`http://127.0.0.1:${port}/metrics`)
    return members === undefined || m.body.includes(`ringlimit_ring_members ${members}`)
  })

const [sp, ap, bp, apeer, bpeer] = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()]
const peers = `127.0.0.1:${apeer},127.0.0.1:${bpeer}`
const single = start({ PORT: String(sp), PEER_PORT: String(await freePort()) })
const a = start({ PORT: String(ap), PEER_HOST: '127.0.0.1', PEER_PORT: String(apeer), PEERS: peers, CLUSTER_SECRET: SECRET })
const b = start({ PORT: String(bp), PEER_HOST: '127.0.0.1', PEER_PORT: String(bpeer), PEERS: peers, CLUSTER_SECRET: SECRET })
await ready(sp)
await ready(ap, 2)
await ready(bp, 2)
let base
if (BASELINE !== undefined) {
  const [oap, obp, oapeer, obpeer] = [await freePort(), await freePort(), await freePort(), await freePort()]
  const opeers = `127.0.0.1:${oapeer},127.0.0.1:${obpeer}`
  const main = buildMain(BASELINE)
  const oa = start({ PORT: String(oap), PEER_HOST: '127.0.0.1', PEER_PORT: String(oapeer), PEERS: opeers, CLUSTER_SECRET: SECRET }, main)
  const ob = start({ PORT: String(obp), PEER_HOST: '127.0.0.1', PEER_PORT: String(obpeer), PEERS: opeers, CLUSTER_SECRET: SECRET }, main)
  await ready(oap, 2)
  await ready(obp, 2)
  base = { pids: [oa.pid, ob.pid], ports: [oap, obp] }
}

// 1. Latency: sequential requests on one keep-alive connection, keys owned by A vs by B, sent to A.
const ring = new HashRing(peers.split(','))
const ownedBy = (member, n) => {
  const out = []
  for (let i = 0; out.length < n; i++) if (ring.owner(ringKeyOf('lat', 'k' + i)) === member) out.push('k' + i)
  return out
}
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
const post = (port, identifier) =>
  new Promise((resolve, reject) => {
    const started = process.hrtime.bigint()
    const req = http.request(
      { host: '127.0.0.1', port, path: '/limit', method: 'POST', agent, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' } },
      (res) => {
        let body = ''
        res.on('data', (d) => (body += d))
        res.on('end', () => resolve({ ms: Number(process.hrtime.bigint() - started) / 1e6, server: JSON.parse(body).data._request.processing_time_ms }))
      },
    )
    req.on('error', reject)
    req.end(JSON.stringify({ namespace: 'lat', identifier, limit: 1000000, duration: 60 }))
  })
const pct = (xs, p) => {
  const s = [...xs].sort((x, y) => x - y)
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]
}
const latency = {}
for (const [label, member] of [
  ['local', `127.0.0.1:${apeer}`],
  ['forwarded', `127.0.0.1:${bpeer}`],
]) {
  const ids = ownedBy(member, 500)
  for (let i = 0; i < 500; i++) await post(ap, ids[i % 500]) // warm-up
  const client = [],
    server = []
  for (let i = 0; i < 3000; i++) {
    const r = await post(ap, ids[i % 500])
    client.push(r.ms)
    server.push(r.server)
  }
  latency[label] = { clientP50: pct(client, 0.5), clientP99: pct(client, 0.99), serverP50: pct(server, 0.5), serverP99: pct(server, 0.99) }
}
agent.destroy()
const f = (x) => x.toFixed(3)
console.log('latency, sequential requests to node A (ms)         p50     p99   (service-side processing_time_ms p50 / p99)')
for (const [k, v] of Object.entries(latency))
  console.log(`  ${k.padEnd(10)}                                      ${f(v.clientP50)}  ${f(v.clientP99)}   (${f(v.serverP50)} / ${f(v.serverP99)})`)
console.log(
  `  added by forwarding: p50 +${f(latency.forwarded.clientP50 - latency.local.clientP50)} ms, p99 +${f(latency.forwarded.clientP99 - latency.local.clientP99)} ms`,
)

// 2. CPU per decision: standalone node vs the 2-node cluster driven on both nodes.
async function wrk(port, conns) {
  const w = spawnTracked('wrk', 'wrk', ['-t1', `-c${conns}`, `-d${SECONDS}s`, '-s', lua, `http://127.0.0.1:${port}`], { stdout: 'all' })
  const code = await w.exited
  const requests = /(\d+) requests in/.exec(w.out)?.[1]
  if (requests === undefined) throw new Error(`wrk gave no result (exit ${code}): ${(w.err || w.out).trim().slice(-300)}`)
  return Number(requests)
}
async function measure(label, pids, ports) {
  await Promise.all(ports.map((p) => wrk(p, Math.round(50 / ports.length)))) // warm-up is the first round's discard
  const before = pids.map(cpuTicks)
  const wall0 = performance.now()
  const reqs = (await Promise.all(ports.map((p) => wrk(p, Math.round(50 / ports.length))))).reduce((x, y) => x + y, 0)
  const ticks = pids.map(cpuTicks).reduce((s, t, i) => s + t - before[i], 0)
  conditions.add(label, ticks / TICK, (performance.now() - wall0) / 1000, pids.length)
  return { reqs, usPerReq: ((ticks / TICK) * 1e6) / reqs }
}
const rows = []
for (let r = 0; r < ROUNDS; r++) {
  const local = await measure('all local, 1 node', [single.pid], [sp])
  // The two builds take turns going first, so a drift in the machine's load favours neither.
  const baselineFirst = base !== undefined && r % 2 === 1
  const early = baselineFirst ? await measure('baseline build, half forwarded, 2 nodes', base.pids, base.ports) : undefined
  const cluster = await measure('half forwarded, 2 nodes', [a.pid, b.pid], [ap, bp])
  const baseline = base === undefined ? undefined : (early ?? (await measure('baseline build, half forwarded, 2 nodes', base.pids, base.ports)))
  rows.push({ local, cluster, baseline, ratio: cluster.usPerReq / local.usPerReq })
  console.log(
    `round ${r + 1}: all local ${local.usPerReq.toFixed(1)} µs/decision (${Math.round(local.reqs / SECONDS)} req/s) | half forwarded, both nodes ${cluster.usPerReq.toFixed(1)} µs/decision (${Math.round(cluster.reqs / SECONDS)} req/s) | ratio ${(cluster.usPerReq / local.usPerReq).toFixed(2)}` +
      (baseline === undefined
        ? ''
        : ` | baseline build, half forwarded ${baseline.usPerReq.toFixed(1)} µs/decision (${Math.round(baseline.reqs / SECONDS)} req/s)`),
  )
}
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]
const fwd = await get(`http://127.0.0.1:${ap}/metrics`)
const line = (n) =>
  fwd.body
    .split('\n')
    .find((l) => l.startsWith(n))
    ?.split(' ')[1]
console.log(
  `median CPU ratio, half forwarded / all local: ${median(rows.map((x) => x.ratio)).toFixed(2)} (node A forwarded ${line('ringlimit_forwarded_total{outcome="allowed"}')} decisions, decided ${line('ringlimit_requests_total{status="200",algorithm="fixed-window"}')} requests)`,
)
if (base !== undefined) {
  // Extra CPU a forwarded decision costs over a local one: the cluster's excess over the
  // all-local node, per forwarded decision (about half of them are forwarded).
  const perForward = (x) => (x.cluster - x.local) / 0.5
  const m = (f) => median(rows.map(f))
  console.log(
    `median µs/decision, half forwarded: this build ${m((x) => x.cluster.usPerReq).toFixed(1)}, baseline ${m((x) => x.baseline.usPerReq).toFixed(1)}, ratio ${m((x) => x.cluster.usPerReq / x.baseline.usPerReq).toFixed(3)}`,
  )
  console.log(
    `median extra µs per forwarded decision over a local one: this build ${m((x) => perForward({ cluster: x.cluster.usPerReq, local: x.local.usPerReq })).toFixed(1)}, baseline ${m((x) => perForward({ cluster: x.baseline.usPerReq, local: x.local.usPerReq })).toFixed(1)}`,
  )
}
conditions.print()
killAllSync()
process.exit(0)

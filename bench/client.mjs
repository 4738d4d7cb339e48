// The ring-aware client (issue 13): total server CPU per decision of a 3-node cluster driven
// through RingLimitClient (each check to its key's owner) and through the same client in
// round-robin routing (what a load balancer does: 2/3 of the checks forwarded), against one
// node deciding everything locally; and the client's own CPU per call beside a bare undici
// request. Same run, same machine, same concurrency; ratios, medians over rounds.
//
//   npm run build && node bench/client.mjs [--seconds 6] [--rounds 3] [--concurrency 48]
import { createInterface } from 'node:readline'
import { installCleanup, killAllSync, spawnTracked } from './lib/children.mjs'
import { RunConditions } from './lib/conditions.mjs'
import { freePort, get, waitFor, waitReady } from './lib/net.mjs'
import { benchOptions } from './lib/options.mjs'
import { cpuNs } from './lib/procfs.mjs'
import { spawnNode } from './lib/servers.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `The ring-aware client: server CPU per decision of a 3-node cluster driven through
RingLimitClient (to each key's owner, and round-robin) against one node deciding locally, and
the client's own CPU per call beside a bare undici request. Needs the build (npm run build).`,
  options: {
    seconds: { type: 'number', min: 1, default: 6, help: 'measured seconds per row and round' },
    rounds: { type: 'number', min: 1, default: 3, help: 'rounds; each runs every row once' },
    concurrency: { type: 'number', min: 1, default: 48, help: 'concurrent checks of the driver' },
  },
})
const SECONDS = args.seconds
const ROUNDS = args.rounds
const CONCURRENCY = args.concurrency
const KEY = 'svc_sk_' + 'c'.repeat(40)
const SECRET = 'bench-client-' + 'k7Qx9PzR2mWv4LtB8nYc3HsJ6dFg1AeU5oKi0'
const IDLE_SECONDS = 2

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
installCleanup()
const conditions = new RunConditions()

// REPLICAS=1: this bench prices what the client saves (forwards); with the default (2 with
// peers) every decision in the 3-node rows is also replicated, which bench/replication.mjs
// prices (1.40x at load 3.5): with it, client to owners measured 3.42x one node, not 1.5x.
const start = (env) => spawnNode('ringlimit', { API_KEYS: KEY, REPLICAS: '1', ...env })
const totalNs = (pids) => pids.reduce((s, p) => s + cpuNs(p), 0)

/**
 * What the servers burn doing nothing (heartbeats every 200 ms between members, timers,
 * sweeps), in ns per second: subtracted from a row's CPU, since on a busy shared machine the
 * check rate can be low enough for it to matter.
 */
async function idleNsPerSecond(pids) {
  const before = totalNs(pids)
  const t0 = performance.now()
  await sleep(IDLE_SECONDS * 1000)
  return (totalNs(pids) - before) / ((performance.now() - t0) / 1000)
}
/** Until the node at `port` lists `members` members, each with its URL (what the client routes by). */
const directoryComplete = (port, members) =>
  waitFor(async () => {
    const c = JSON.parse((await get(`http://127.0.0.1:${port}/cluster`, 2000, { authorization: `Bearer ${KEY}` })).body).data
    return c.members.length === members && c.members.every((m) => m.url !== null)
  })

const single = await freePort()
const ports = [await freePort(), await freePort(), await freePort()]
const peerPorts = [await freePort(), await freePort(), await freePort()]
const peers = peerPorts.map((p) => `127.0.0.1:${p}`).join(',')
const singleNode = start({ PORT: String(single), PEER_PORT: String(await freePort()) })
const clusterNodes = ports.map((port, i) =>
  start({ PORT: String(port), PEER_HOST: '127.0.0.1', PEER_PORT: String(peerPorts[i]), PEERS: peers, CLUSTER_SECRET: SECRET }),
)
await waitReady(`http://127.0.0.1:${single}/ready`, singleNode)
for (const p of ports) await directoryComplete(p, 3)

/** Run one driver; server CPU is read when it says "start" and when it prints its result. */
async function drive(label, spec, serverPids) {
  const idle = await idleNsPerSecond(serverPids)
  const driver = new URL('./lib/client-driver.mjs', import.meta.url).pathname
  const d = spawnTracked('client-driver', process.execPath, [driver, JSON.stringify({ seconds: SECONDS, concurrency: CONCURRENCY, ...spec, key: KEY })])
  if (d.pid === undefined) throw new Error(`client-driver did not start: ${d.err}`)
  let before
  let result
  createInterface({ input: d.child.stdout }).on('line', (line) => {
    if (line === 'start') before = totalNs(serverPids)
    else if (line.startsWith('{')) result = { ns: totalNs(serverPids) - before, r: JSON.parse(line) }
  })
  const code = await d.exited
  if (result === undefined) throw new Error(`client-driver gave no result (exit ${code}): ${d.err.trim().slice(-300)}`)
  const { ns, r } = result
  conditions.add(label, ns / 1e9, r.seconds, serverPids.length)
  return {
    rate: r.calls / r.seconds,
    serverUs: (ns - idle * r.seconds) / 1e3 / r.calls,
    rawServerUs: ns / 1e3 / r.calls,
    clientUs: r.cpuUs / r.calls,
    stats: d.err.trim() === '' ? undefined : JSON.parse(d.err.trim().split('\n').pop()),
  }
}

const url = (p) => `http://127.0.0.1:${p}`
const ROWS = [
  ['1 node, bare undici Pool', { mode: 'undici', urls: [url(single)] }, [singleNode.pid]],
  ['1 node, RingLimitClient', { mode: 'client', urls: [url(single)], routing: 'owner' }, [singleNode.pid]],
  // Each node of the cluster below sees a third of the checks: this row shows what one node
  // costs per decision at that rate, where fewer checks share each event-loop wake-up.
  ['1 node, RingLimitClient, 1/3 load', { mode: 'client', urls: [url(single)], routing: 'owner', concurrency: Math.round(CONCURRENCY / 3) }, [singleNode.pid]],
  ['3 nodes, client round-robin', { mode: 'client', urls: [url(ports[0])], routing: 'round-robin' }, clusterNodes.map((c) => c.pid)],
  ['3 nodes, client to owners', { mode: 'client', urls: [url(ports[0])], routing: 'owner' }, clusterNodes.map((c) => c.pid)],
]
const results = ROWS.map(() => [])
for (let round = 0; round < ROUNDS; round++) {
  for (const [i, [label, spec, pids]] of ROWS.entries()) {
    const r = await drive(label, spec, pids)
    results[i].push(r)
    console.log(
      `round ${round + 1} ${label.padEnd(30)} ${Math.round(r.rate).toString().padStart(6)} checks/s  server ${r.serverUs.toFixed(1).padStart(5)} µs/decision (${r.rawServerUs.toFixed(1)} before idle)  client ${r.clientUs.toFixed(1).padStart(5)} µs/call` +
        (r.stats ? `  (owner ${r.stats.owner}, fallback ${r.stats.fallback}, degraded ${r.stats.degraded})` : ''),
    )
  }
}
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]
const med = results.map((rs) => ({
  rate: median(rs.map((r) => r.rate)),
  serverUs: median(rs.map((r) => r.serverUs)),
  rawServerUs: median(rs.map((r) => r.rawServerUs)),
  clientUs: median(rs.map((r) => r.clientUs)),
}))
// Ratios per round, then the median: rows of one round ran back to back.
const ratio = (i, base) => median(results[i].map((r, k) => r.serverUs / results[base][k].serverUs))
console.log(`\nmedians of ${ROUNDS} rounds, ${SECONDS} s each, ${CONCURRENCY} concurrent checks, node ${process.version}`)
console.log(
  '| row | checks/s | server CPU µs/decision, all nodes, idle subtracted (raw) | × 1-node local | × 1-node at 1/3 load | client CPU µs/call | × bare undici |',
)
console.log('|---|---:|---:|---:|---:|---:|---:|')
const clientRatio = (i) => median(results[i].map((r, k) => r.clientUs / results[0][k].clientUs))
ROWS.forEach(([label], i) =>
  console.log(
    `| ${label} | ${Math.round(med[i].rate)} | ${med[i].serverUs.toFixed(1)} (${med[i].rawServerUs.toFixed(1)}) | ${ratio(i, 1).toFixed(2)}× | ${ratio(i, 2).toFixed(2)}× | ${med[i].clientUs.toFixed(1)} | ${clientRatio(i).toFixed(2)}× |`,
  ),
)
console.log('')
conditions.print()
killAllSync()
process.exit(0)

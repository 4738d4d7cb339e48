// Drain figures for the hand-off (issue 4): time for a node holding N keys to hand them
// all to its peer on SIGTERM, and keys handed over per second.
//
//   npm run build && node bench/drain.mjs [--keys 1000000]
//
// Two real nodes on loopback. Node A is filled through its own peer channel (a forwarded
// decision is always decided locally, so this puts N distinct keys on A in seconds);
// then A gets SIGTERM and its log says how many keys it handed over and how long it took.
import { randomBytes } from 'node:crypto'
import { installCleanup, killAllSync } from './lib/children.mjs'
import { RunConditions } from './lib/conditions.mjs'
import { freePort } from './lib/net.mjs'
import { benchOptions } from './lib/options.mjs'
import { clockTicks, cpuTicks } from './lib/procfs.mjs'
import { spawnNode } from './lib/servers.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `Hand-off on SIGTERM: two real nodes; node A is filled with N keys through its peer channel,
then stopped; its log says how many keys it handed to node B and how long it took.
Needs the build (npm run build).`,
  options: {
    keys: { type: 'number', min: 1, default: 1_000_000, help: 'keys node A holds when it is stopped' },
  },
})
const KEYS = args.keys
const { DEFAULTS } = await import('../dist/src/config.js')
const { PeerClient } = await import('../dist/src/peer/index.js')
const { HashRing } = await import('../dist/src/shard/ring/ring.js')
const { ringKeyOf } = await import('../dist/src/shard/ring/state-key.js')
const conditions = new RunConditions()
const SECRET = randomBytes(32).toString('base64url')
const API_KEY = 'svc_sk_' + 'b'.repeat(40)

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const ports = [await freePort(), await freePort(), await freePort(), await freePort()]
const peers = `127.0.0.1:${ports[2]},127.0.0.1:${ports[3]}`
installCleanup()
const nodes = [0, 1].map((i) =>
  spawnNode(
    `ringlimit n${i + 1}`,
    {
      PORT: String(ports[i]),
      PEER_HOST: '127.0.0.1',
      PEER_PORT: String(ports[2 + i]),
      PEERS: peers,
      CLUSTER_SECRET: SECRET,
      API_KEYS: API_KEY,
      MAX_KEYS: String(KEYS * 2),
      DRAIN_TIMEOUT_MS: '300000',
      METRICS_CACHE_MS: '0', // the fill's figures are read from /metrics right after it
      LOG_LEVEL: 'info',
    },
    { stdout: 'all' },
  ),
)

const metric = async (port, name) => {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  return Number(
    text
      .split('\n')
      .find((l) => l.startsWith(name + ' '))
      ?.split(' ')[1],
  )
}
for (;;) {
  try {
    if ((await metric(ports[0], 'ringlimit_ring_members')) === 2 && (await metric(ports[1], 'ringlimit_ring_members')) === 2) break
  } catch {}
  await sleep(100)
}

process.stdout.write(`filling node A with ${KEYS.toLocaleString()} keys through its peer channel… `)
// Only identifiers that A owns, so that none of them is a stray state A would pass on.
const ring = new HashRing(peers.split(','))
const owned = []
for (let i = 0; owned.length < KEYS; i++) if (ring.owner(ringKeyOf('bench', `user-${i}`)) === `127.0.0.1:${ports[2]}`) owned.push(`user-${i}`)
const client = new PeerClient({
  host: '127.0.0.1',
  port: ports[2],
  secret: SECRET,
  nodeId: 'bench-loader',
  serverNodeId: `127.0.0.1:${ports[2]}`,
  timeoutMs: 30_000,
  heartbeatIntervalMs: DEFAULTS.heartbeatIntervalMs,
  failureTimeoutMs: DEFAULTS.failureTimeoutMs,
})
client.connect()
await new Promise((r) => client.once('up', r))
const errors = new Map()
const fillStart = Date.now()
const fillTicks = cpuTicks(nodes[0].pid)
for (let sent = 0; sent < KEYS;) {
  const batch = Math.min(20_000, KEYS - sent)
  await new Promise((resolve) => {
    let left = batch
    for (let i = 0; i < batch; i++)
      client.decide({ namespace: 'bench', identifier: owned[sent + i], algorithm: { code: (sent + i) % 4 }, limit: 100, duration: 3600, cost: 1 }, (err, r) => {
        if (err || r.code !== 0) errors.set(err?.code ?? 'code' + r.code, (errors.get(err?.code ?? 'code' + r.code) ?? 0) + 1)
        if (--left === 0) resolve()
      })
  })
  sent += batch
}
// The fill is the measured load: node A decides every key (node B is idle meanwhile).
conditions.add('fill of node A', (cpuTicks(nodes[0].pid) - fillTicks) / clockTicks(), (Date.now() - fillStart) / 1000, 1)
client.close()
if (errors.size > 0) console.log('fill errors:', Object.fromEntries(errors))
const held = await metric(ports[0], 'ringlimit_stored_keys')
console.log(
  `done in ${((Date.now() - fillStart) / 1000).toFixed(1)} s; A holds ${held.toLocaleString()} keys, RSS ${((await metric(ports[0], 'process_resident_memory_bytes')) / 2 ** 20).toFixed(0)} MiB`,
)

const before = await metric(ports[1], 'ringlimit_stored_keys')
const t0 = Date.now()
process.kill(nodes[0].pid, 'SIGTERM')
await nodes[0].exited
const wall = Date.now() - t0
const line = nodes[0].out.split('\n').find((l) => l.includes('handedOver')) ?? '{}'
const report = JSON.parse(line)
const after = await metric(ports[1], 'ringlimit_stored_keys')
console.log(
  `SIGTERM → exit: ${wall} ms; hand-off ${report.ms} ms; handed over ${report.handedOver?.toLocaleString()} keys, not handed over ${report.notHandedOver}`,
)
console.log(`keys handed over per second: ${Math.round(report.handedOver / (report.ms / 1000)).toLocaleString()}`)
console.log(`node B stored keys: ${before.toLocaleString()} → ${after.toLocaleString()} (+${(after - before).toLocaleString()})`)
conditions.print()
killAllSync()
process.exit(0)

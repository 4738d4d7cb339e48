// The client with one node of three hung (issue 32): three real nodes on loopback, one
// RingLimitClient routing each check to its key's owner, a steady stream of checks over many
// keys; one node gets SIGSTOP (it accepts connections and answers nothing), then SIGCONT.
// Counts, for the checks issued while it is stopped, how many of those whose key a HEALTHY
// node owns came back degraded, and for how long after the stop they did (the fail-open
// window the hung node costs the keys it does not own).
//
//   npm run build && node bench/client-hung-node.mjs [--timeout-ms N] [--stopped-seconds 4]
import { installCleanup, killAllSync } from './lib/children.mjs'
import { RunConditions } from './lib/conditions.mjs'
import { get } from './lib/net.mjs'
import { benchOptions } from './lib/options.mjs'
import { buildMain, makeApiKey, ringlimitMain, startRinglimit } from './lib/servers.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `One node of three SIGSTOPped under a steady stream of RingLimitClient checks: how many
checks of keys owned by the two healthy nodes come back degraded, and for how long. Needs the
build (npm run build).`,
  options: {
    'timeout-ms': { type: 'number', min: 1, defaultText: "the client's default timeoutMs", help: 'the client timeoutMs' },
    'stopped-seconds': { type: 'number', min: 1, default: 4, help: 'how long the node stays stopped' },
    concurrency: { type: 'number', min: 1, default: 32, help: 'checks in flight at once' },
    baseline: { type: 'string', defaultText: 'this build', help: 'another checkout built there: its server and client (before/after rows)' },
  },
})
const dir = args.baseline
const main = dir === undefined ? ringlimitMain : buildMain(dir)
const clientModule = dir === undefined ? '../dist/src/client/index.js' : `${dir}/dist/src/client/index.js`
const { RingLimitClient } = await import(clientModule)
const { HashRing } = await import('../dist/src/shard/ring/ring.js')
const { ringKeyOf } = await import('../dist/src/shard/ring/state-key.js')
installCleanup()
const conditions = new RunConditions()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const apiKey = makeApiKey()

const cluster = await startRinglimit({ apiKey, nodes: 3, main })
try {
  const urls = cluster.urls
  const client = new RingLimitClient({ urls, apiKey, ...(args['timeout-ms'] !== undefined ? { timeoutMs: args['timeout-ms'] } : {}) })
  await client.ready()
  const view = JSON.parse((await get(urls[0] + '/cluster', 2000, { authorization: `Bearer ${apiKey}` })).body).data
  const ring = new HashRing(view.members.map((m) => m.id))
  const hung = view.members.find((m) => m.url === urls[2])?.id ?? 'n3'
  const KEYS = 3000
  // Below 2,048: no shares, so every check of a key the caller does not own is forwarded to its owner.
  const LIMIT = 2000
  const ownerOf = Array.from({ length: KEYS }, (_, i) => ring.owner(ringKeyOf('hang', 'k' + i)))

  const rows = [] // [issuedAt, healthyOwner, degraded]
  let running = true
  let next = 0
  const worker = async () => {
    while (running) {
      const i = next++ % KEYS
      const t = performance.now()
      const r = await client.limit({ namespace: 'hang', identifier: 'k' + i, limit: LIMIT, duration: 3600 })
      rows.push([t, ownerOf[i] !== hung, r.degraded === true])
    }
  }
  const workers = Array.from({ length: args.concurrency }, worker)
  // Warm: until 2,000 checks in a row came back undegraded (cold connections on a loaded
  // machine can outlast a short timeoutMs and get nodes skipped for a while), at most 20 s.
  const warmUntil = performance.now() + 20_000
  while (performance.now() < warmUntil && (rows.length < 2000 || rows.slice(-2000).some((r) => r[2]))) await sleep(100)
  await sleep(500)
  const stoppedAt = performance.now()
  process.kill(cluster.recs[2].pid, 'SIGSTOP')
  await sleep(args['stopped-seconds'] * 1000)
  const resumedAt = performance.now()
  process.kill(cluster.recs[2].pid, 'SIGCONT')
  await sleep(1000)
  running = false
  await Promise.all(workers)
  await client.close()

  const during = rows.filter((r) => r[0] >= stoppedAt && r[0] < resumedAt)
  const healthy = during.filter((r) => r[1])
  const healthyDegraded = healthy.filter((r) => r[2])
  const hungRows = during.filter((r) => !r[1])
  const lastBad = healthyDegraded.length === 0 ? stoppedAt : healthyDegraded.reduce((m, r) => Math.max(m, r[0]), 0)
  const before = rows.filter((r) => r[0] < stoppedAt && r[0] >= stoppedAt - 500)
  console.log(
    `client timeoutMs ${args['timeout-ms'] ?? 'default'}, ${args.concurrency} in flight, ${args['stopped-seconds']} s stopped${dir ? ', build ' + dir : ''}`,
  )
  console.log(`the last 500 ms before the stop: ${before.length} checks, ${before.filter((r) => r[2]).length} degraded`)
  console.log(
    `while stopped: keys of healthy owners ${healthyDegraded.length} of ${healthy.length} degraded, the last issued ${(lastBad - stoppedAt).toFixed(0)} ms after the stop; ` +
      `keys of the stopped node ${hungRows.filter((r) => r[2]).length} of ${hungRows.length} degraded`,
  )
} finally {
  killAllSync()
}
conditions.print()

// Replication cost (issue 11): the 3-node cluster with REPLICAS=1 and REPLICAS=2 under the
// same load, interleaved run by run in one invocation, compared by server CPU per decision
// (all three nodes, from /proc); the replication lag from the nodes' own histogram
// (ringlimit_replication_lag_seconds); and memory per stored key with replicas.
//
//   npm run build && node bench/replication.mjs [--runs 3] [--duration 8] [--connections 48] [--keys 300000] [--limit 1000000] [--loader wrk|autocannon]
//
// Load: wrk when installed, else autocannon (bench/lib/load.mjs), connections spread over the three nodes, 10 000
// identifiers with a limit nobody reaches (the ringlimit-cluster3 row of run.mjs).
// Memory: after the timed runs, each cluster is filled with --keys distinct keys; RSS of the
// three nodes' growth over the distinct keys, and over the states they hold (owned + replica),
// both readings taken once RSS has settled (settledRss).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir, cpus } from 'node:os'
import path from 'node:path'
import { installCleanup } from './lib/children.mjs'
import { RunConditions } from './lib/conditions.mjs'
import { get } from './lib/net.mjs'
import { benchOptions } from './lib/options.mjs'
import { GroupWatch, clockTicks, settledRss } from './lib/procfs.mjs'
import { runLoad, wrkVersion } from './lib/load.mjs'
import { makeApiKey, startRinglimit } from './lib/servers.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `Replication cost: a 3-node cluster with REPLICAS=1 and with REPLICAS=2 under the same load,
interleaved run by run; server CPU per decision (all nodes, /proc), the replication lag from
the nodes' histogram, and memory per stored key with replicas. Needs the build (npm run build).`,
  options: {
    runs: { type: 'number', min: 1, default: 3, help: 'runs per cluster (medians)' },
    duration: { type: 'number', min: 1, arg: 'S', default: 8, help: 'measured seconds per run' },
    connections: { type: 'number', min: 1, default: 48, help: 'connections, spread over the three nodes' },
    keys: { type: 'number', min: 1, default: 300000, help: 'distinct keys filled for the memory figures' },
    limit: {
      type: 'number',
      min: 1,
      default: 1000000,
      help: 'the limit of the timed load (fixed window of 60 s); below 2,048 no share answers it (docs/api.md, Shares), so every decision a non-owner gets is forwarded',
    },
    loader: { type: 'string', arg: 'L', choices: ['wrk', 'autocannon'], defaultText: 'wrk when installed, else autocannon', help: 'wrk or autocannon' },
  },
})
installCleanup()
const conditions = new RunConditions()
const RUNS = args.runs
const DURATION = args.duration
const CONNECTIONS = args.connections
const KEYS = args.keys
const LOADER = args.loader ?? (wrkVersion() ? 'wrk' : 'autocannon')
const tmp = mkdtempSync(path.join(tmpdir(), 'ringlimit-bench-repl-'))
const apiKey = makeApiKey()
const headers = { authorization: `Bearer ${apiKey}` }
const ALLOWED = { namespace: 'bench', limit: args.limit, duration: 60, idSpace: 10000 }

async function scrape(urls) {
  const sums = {}
  const lagBuckets = new Map()
  for (const u of urls) {
    const text = (await get(u + '/metrics', 3000)).body
    for (const line of text.split('\n')) {
      const m = /^([a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+|\+Inf)$/.exec(line)
      if (!m) continue
      if (m[1] === 'ringlimit_replication_lag_seconds_bucket') {
        const le = /le="([^"]+)"/.exec(m[2])[1]
        lagBuckets.set(le, (lagBuckets.get(le) ?? 0) + Number(m[3]))
      } else sums[m[1]] = (sums[m[1]] ?? 0) + Number(m[3])
    }
  }
  return { sums, lagBuckets }
}

/** The smallest bucket bound holding the q-quantile of the (cumulative) bucket counts between two scrapes. */
function quantile(before, after, q) {
  const rows = [...after.lagBuckets].map(([le, n]) => [le, n - (before.lagBuckets.get(le) ?? 0)])
  const total = rows.find(([le]) => le === '+Inf')?.[1] ?? 0
  if (total === 0) return null
  for (const [le, n] of rows) if (n >= q * total) return le === '+Inf' ? '>1s' : `≤ ${Number(le) * 1000} ms`
  return null
}

async function measure(server, run) {
  const watch = new GroupWatch(server.pgids)
  watch.refresh()
  const before = await scrape(server.urls)
  let cpu0 = 0
  const res = await runLoad(
    {
      loader: LOADER,
      urls: server.urls,
      connections: CONNECTIONS,
      durationSec: DURATION,
      headers,
      bodySpec: { ...ALLOWED, idPrefix: `r${run}-` },
      tmpDir: tmp,
    },
    () => (cpu0 = watch.cpuTicks()),
  )
  const cpuSec = (watch.cpuTicks() - cpu0) / clockTicks()
  if (run > 0) conditions.add(`REPLICAS=${server.replicas}`, cpuSec, res.wallSec, server.urls.length)
  const after = await scrape(server.urls)
  const d = (k) => (after.sums[k] ?? 0) - (before.sums[k] ?? 0)
  if ((res.status['200'] ?? 0) < res.completed * 0.99) throw new Error(`not all 200: ${JSON.stringify(res.status)}`)
  return {
    rps: res.rps,
    cpuUsPerReq: (cpuSec * 1e6) / res.completed,
    degraded: d('ringlimit_degraded_total'),
    replicated: d('ringlimit_states_replicated_total'),
    dropped: d('ringlimit_replication_dropped_total'),
    lagP50: quantile(before, after, 0.5),
    lagP99: quantile(before, after, 0.99),
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const results = { 1: [], 2: [] }
const servers = {}
for (const replicas of [1, 2]) servers[replicas] = { ...(await startRinglimit({ apiKey, nodes: 3, extraEnv: { REPLICAS: String(replicas) } })), replicas }
// Warm-up, then interleaved runs: the machine's load drifts, each pair shares it.
for (const r of [1, 2]) await measure(servers[r], 0)
for (let run = 1; run <= RUNS; run++) {
  for (const r of [1, 2]) {
    const m = await measure(servers[r], run)
    results[r].push(m)
    console.log(
      `run ${run} REPLICAS=${r}: ${m.rps.toFixed(0)} req/s, ${m.cpuUsPerReq.toFixed(1)} µs CPU/decision, lag p99 ${m.lagP99 ?? '-'}, replicated ${m.replicated}, dropped ${m.dropped}, degraded ${m.degraded}`,
    )
  }
}

// Memory: fill each cluster with KEYS distinct keys.
const memory = {}
for (const r of [1, 2]) {
  const server = servers[r]
  const rssBefore = await settledRss(server.pgids)
  await runLoad({
    loader: 'autocannon',
    urls: server.urls,
    connections: CONNECTIONS,
    amount: KEYS,
    headers,
    bodySpec: { namespace: 'bench', limit: 10, duration: 3600, idSpace: KEYS, idPrefix: 'mem-' },
    tmpDir: tmp,
  })
  const rssBytes = await settledRss(server.pgids)
  const { sums } = await scrape(server.urls)
  const grown = rssBytes - rssBefore
  const held = (sums.ringlimit_stored_keys ?? 0) + (sums.ringlimit_replica_states ?? 0)
  memory[r] = {
    stored: sums.ringlimit_stored_keys,
    replicas: sums.ringlimit_replica_states ?? 0,
    rssMB: rssBytes / 1e6,
    rssPerKey: grown / KEYS,
    rssPerState: grown / (held || 1),
  }
}
for (const r of [1, 2]) await servers[r].stop()
rmSync(tmp, { recursive: true, force: true })

const cpu1 = median(results[1].map((m) => m.cpuUsPerReq))
const cpu2 = median(results[2].map((m) => m.cpuUsPerReq))
console.log(`\nreplication bench — ${new Date().toISOString()} — ${cpus().length} cpus, node ${process.version}`)
console.log(`${RUNS} interleaved runs of ${DURATION} s, ${LOADER}, ${CONNECTIONS} connections over 3 nodes (medians)\n`)
console.table({
  'REPLICAS=1': {
    'µs CPU/decision': cpu1.toFixed(1),
    'vs REPLICAS=1': '1.00',
    'req/s': median(results[1].map((m) => m.rps)).toFixed(0),
    'lag p50': '-',
    'lag p99': '-',
  },
  'REPLICAS=2': {
    'µs CPU/decision': cpu2.toFixed(1),
    'vs REPLICAS=1': (cpu2 / cpu1).toFixed(2),
    'req/s': median(results[2].map((m) => m.rps)).toFixed(0),
    'lag p50': results[2].map((m) => m.lagP50).join(' / '),
    'lag p99': results[2].map((m) => m.lagP99).join(' / '),
  },
})
console.log(`memory after ${KEYS} distinct keys (3 nodes' RSS):`)
console.table(
  Object.fromEntries(
    Object.entries(memory).map(([r, m]) => [
      `REPLICAS=${r}`,
      {
        'owned states': m.stored,
        'replica states': m.replicas,
        'RSS MB': m.rssMB.toFixed(0),
        'RSS growth bytes/key': m.rssPerKey.toFixed(0),
        'per state held': m.rssPerState.toFixed(0),
      },
    ]),
  ),
)
conditions.print()
process.exit(0)

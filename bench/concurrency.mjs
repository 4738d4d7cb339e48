// Concurrency slots against a window decision, in one run: the server's own CPU time
// (utime + stime from /proc) per unit of work, medians over rounds that alternate the rows.
//
//   node bench/concurrency.mjs [--rounds 3] [--seconds 5] [--connections 32]
//
// Rows (one node each, keep-alive connections from node:http, every answer checked):
//   limit      POST /limit, fixed window, 10 k identifiers (all 200): one decision
//   acquire    POST /limit, algorithm concurrency (limit 1,000,000, all 200): one slot held
//   pair       acquire, then POST /limit/release of its lease: a slot's whole life
// Figures: CPU µs per operation; pair / limit is what a concurrency-limited request costs
// the service against a rate-limited one (two HTTP requests and a lease signed and checked).
import http from 'node:http'
import { installCleanup } from './lib/children.mjs'
import { RunConditions } from './lib/conditions.mjs'
import { benchOptions } from './lib/options.mjs'
import { GroupWatch, clockTicks } from './lib/procfs.mjs'
import { median } from './lib/report.mjs'
import { makeApiKey, startRinglimit } from './lib/servers.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `Concurrency: acquire + release against a /limit decision, the server's CPU per operation
(/proc), medians over rounds that alternate the rows. Needs the build (npm run build).`,
  options: {
    rounds: { type: 'number', min: 1, default: 3, help: 'rounds; each runs every row once' },
    seconds: { type: 'number', min: 1, default: 5, help: 'measured seconds per row and round' },
    connections: { type: 'number', min: 1, default: 32, help: 'concurrent request loops (keep-alive connections)' },
  },
})
installCleanup()
const conditions = new RunConditions()
const apiKey = makeApiKey()

function post(agent, url, path, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url + path,
      { method: 'POST', agent, headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' } },
      (res) => {
        const chunks = []
        res.on('data', (c) => chunks.push(c))
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }))
      },
    )
    req.on('error', reject)
    req.end(JSON.stringify(body))
  })
}

const window = (n) => ({ namespace: 'bench', identifier: 'w' + (n % 10000), limit: 1000000, duration: 60 })
const slot = (n) => ({ namespace: 'bench', identifier: 'c' + (n % 10000), limit: 1000000, duration: 60, algorithm: 'concurrency' })

/** One operation of each row; throws on an unexpected answer. */
const OPS = {
  async limit(agent, url, n) {
    const r = await post(agent, url, '/limit', window(n))
    if (r.status !== 200) throw new Error(`limit: ${r.status}`)
  },
  async acquire(agent, url, n) {
    const r = await post(agent, url, '/limit', slot(n))
    if (r.status !== 200) throw new Error(`acquire: ${r.status}`)
  },
  async pair(agent, url, n) {
    const a = await post(agent, url, '/limit', slot(n))
    if (a.status !== 200) throw new Error(`acquire: ${a.status}`)
    const r = await post(agent, url, '/limit/release', { ...slot(n), lease: JSON.parse(a.body).data.lease })
    if (r.status !== 200 || !JSON.parse(r.body).data.released) throw new Error(`release: ${r.status} ${r.body}`)
  },
}

async function drive(op, url, seconds) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: args.connections })
  const until = performance.now() + seconds * 1000
  let n = Math.floor(Math.random() * 1e6)
  let ops = 0
  await Promise.all(
    Array.from({ length: args.connections }, async () => {
      while (performance.now() < until) {
        await op(agent, url, n++)
        ops++
      }
    }),
  )
  agent.destroy()
  return ops
}

async function measure(name, server) {
  const url = server.urls[0]
  await drive(OPS[name], url, 1) // warm-up: JIT, keys
  const watch = new GroupWatch(server.pgids)
  const t0 = watch.cpuTicks()
  const wall0 = performance.now()
  const ops = await drive(OPS[name], url, args.seconds)
  const cpuSec = (watch.cpuTicks() - t0) / clockTicks()
  conditions.add(name, cpuSec, (performance.now() - wall0) / 1000, 1)
  return { usPerOp: (cpuSec * 1e6) / ops, opsPerSec: ops / args.seconds }
}

const rows = Object.keys(OPS)
const results = Object.fromEntries(rows.map((r) => [r, []]))
for (let round = 0; round < args.rounds; round++) {
  for (const name of round % 2 === 0 ? rows : [...rows].reverse()) {
    const server = await startRinglimit({ apiKey })
    try {
      const m = await measure(name, server)
      results[name].push(m)
      console.error(`round ${round + 1} ${name}: ${m.usPerOp.toFixed(1)} µs CPU per operation, ${Math.round(m.opsPerSec)} operations/s`)
    } finally {
      await server.stop()
    }
  }
}

const med = (name) => median(results[name].map((m) => m.usPerOp))
console.log(`\n${args.rounds} rounds × ${args.seconds} s, ${args.connections} connections, medians`)
console.log('| row | CPU µs per operation | operations/s | × limit |')
console.log('|:--|--:|--:|--:|')
for (const name of rows)
  console.log(
    `| ${name} | ${med(name).toFixed(1)} | ${Math.round(median(results[name].map((m) => m.opsPerSec)))} | ${(med(name) / med('limit')).toFixed(2)}× |`,
  )
console.log('')
conditions.print()

// Exactness under load (issue 39's "Done when"): 20 clients, each on its own keep-alive
// connection, spread round-robin over a 3-node cluster with the defaults (REPLICAS=2), all on
// one key of limit 1,000, each sending its requests back to back. Prints how many were
// allowed; ringlimit must allow exactly the limit (exit 1 otherwise). With --gubernator PATH,
// the same against 3 gubernator daemons (printed, not judged: it is the comparison).
//
//   npm run build && node bench/exact-one-key.mjs [--clients 20] [--limit 1000] [--requests 3000]
//                                                [--duration S] [--gubernator PATH]
//
// test/shard/cluster/exact-one-key.process.test.ts asserts the same at test size.
import http from 'node:http'
import { benchOptions } from './lib/options.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `Exactness under load: clients on their own connections, round-robin over 3 nodes (REPLICAS=2),
all on one key; prints how many were allowed and exits 1 unless ringlimit allowed exactly the
limit. With --gubernator PATH also 3 gubernator daemons, printed beside it. Needs the build.`,
  options: {
    clients: { type: 'number', min: 1, default: 20, help: 'clients, each on its own connection, client c on node c % 3' },
    limit: { type: 'number', min: 1, default: 1000, help: 'the key’s limit' },
    requests: { type: 'number', min: 1, default: 3000, help: 'requests in all (spread evenly over the clients); more than --limit' },
    duration: {
      type: 'number',
      min: 1,
      default: 31536000,
      help: 'the window in seconds; the default year ends in no run and takes no share, so every non-owner forwards',
    },
    gubernator: { type: 'string', arg: 'PATH', defaultText: 'none', help: 'a gubernator v2 binary built by hand (bench/README.md): also 3 of its daemons' },
  },
})

const { installCleanup } = await import('./lib/children.mjs')
const { RunConditions } = await import('./lib/conditions.mjs')
const srv = await import('./lib/servers.mjs')
installCleanup()
const conditions = new RunConditions()
if (!srv.ringlimitAvailable()) {
  process.stderr.write(`bench/exact-one-key.mjs: no ${srv.ringlimitMain} (npm run build)\n`)
  process.exit(2)
}

/** One POST on `agent` → { status, body }. */
function post(agent, url, body, headers) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers } },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (d) => (text += d))
        res.on('end', () => resolve({ status: res.statusCode, body: text }))
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

/**
 * Every client sends its share of the requests one after another; all clients at once.
 * classify(reply) → 'allowed' | 'blocked' | 'degraded' | 'other'.
 */
async function drive(urls, body, headers, classify) {
  const agents = Array.from({ length: args.clients }, () => new http.Agent({ keepAlive: true, maxSockets: 1 }))
  const per = Array.from({ length: args.clients }, (_, c) => Math.floor(args.requests / args.clients) + (c < args.requests % args.clients ? 1 : 0))
  const tally = { allowed: 0, blocked: 0, degraded: 0, other: 0 }
  const t0 = performance.now()
  await Promise.all(
    agents.map(async (agent, c) => {
      for (let i = 0; i < per[c]; i++) tally[classify(await post(agent, urls[c % urls.length], body, headers))]++
    }),
  )
  const sec = (performance.now() - t0) / 1000
  agents.forEach((a) => a.destroy())
  return { ...tally, sent: args.requests, sec }
}

const line = (name, r) =>
  `${name.padEnd(34)} allowed ${r.allowed.toLocaleString('en-US').padStart(6)} of ${r.sent.toLocaleString('en-US')}` +
  `  blocked ${r.blocked.toLocaleString('en-US')}  degraded ${r.degraded}  other ${r.other}  (${Math.round(r.sent / r.sec).toLocaleString('en-US')} req/s)` +
  (r.allowed === args.limit && r.degraded === 0 && r.other === 0 ? '  exact' : '  NOT EXACT')

const out = []
let exact = true
const apiKey = srv.makeApiKey()
{
  const server = await srv.startRinglimit({ apiKey, nodes: 3, extraEnv: { REPLICAS: '2' } })
  try {
    const body = JSON.stringify({ namespace: 'bench', identifier: 'exact-one-key', limit: args.limit, duration: args.duration })
    const r = await drive(
      server.urls.map((u) => u + '/limit'),
      body,
      { authorization: `Bearer ${apiKey}` },
      ({ status, body }) => {
        if (status === 429) return 'blocked'
        if (status !== 200) return 'other'
        return JSON.parse(body).data.degraded ? 'degraded' : 'allowed'
      },
    )
    // The invariant: allowed = the limit exactly, nothing failed open, nothing else answered.
    exact = r.allowed === args.limit && r.degraded === 0 && r.other === 0
    out.push(line('ringlimit, 3 nodes, REPLICAS=2', r))
  } finally {
    await server.stop()
  }
}
if (args.gubernator) {
  const server = await srv.startGubernator({ bin: args.gubernator, nodes: 3 })
  try {
    const body = JSON.stringify({ requests: [{ name: 'bench', unique_key: 'exact-one-key', hits: 1, limit: args.limit, duration: args.duration * 1000 }] })
    const r = await drive(
      server.urls.map((u) => u + '/v1/GetRateLimits'),
      body,
      {},
      ({ status, body }) => {
        if (status !== 200) return 'other'
        const a = JSON.parse(body).responses?.[0]
        if (!a || a.error) return 'other'
        return a.status === 'OVER_LIMIT' ? 'blocked' : 'allowed'
      },
    )
    out.push(line('gubernator v2, 3 daemons', r))
  } finally {
    await server.stop()
  }
}
process.stdout.write(
  `\none key of limit ${args.limit.toLocaleString('en-US')} (window ${args.duration} s), ${args.clients} clients round-robin over 3 nodes, ${args.requests.toLocaleString('en-US')} requests\n`,
)
for (const l of out) process.stdout.write(l + '\n')
process.stdout.write(conditions.lines().join('\n') + '\n')
process.exit(exact ? 0 : 1)

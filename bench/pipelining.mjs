// Pipelining on every node (issue 24 item 2), and what shares save (issue 23): a default
// 3-node cluster (REPLICAS=2) loaded on one node at a time by autocannon -p 10 and by a
// 10-deep wrk pipeline over 10,000 identifiers with limit 1,000,000; for each run the
// answers per second, the connections the node closed, the statuses, and how the node
// answered (its own keys, its shares, forwards); then raw pipelined bursts whose answers must
// come back in order; then one hot key another node owns, on n1; then the owners' counts of sampled keys, within the limit. Last, server
// CPU per decision of the 3 nodes loaded round-robin with a shared limit (1,000,000) and with
// one too small to share (2,000: every other key forwarded), against one node, same run.
//
//   npm run build && node bench/pipelining.mjs [--seconds 10] [--rounds 3] [--baseline DIR]
import net from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { installCleanup, killAllSync } from './lib/children.mjs'
import { RunConditions } from './lib/conditions.mjs'
import { get, postJson } from './lib/net.mjs'
import { benchOptions } from './lib/options.mjs'
import { GroupWatch, clockTicks } from './lib/procfs.mjs'
import { runLoad, wrkVersion } from './lib/load.mjs'
import { buildMain, makeApiKey, ringlimitMain, startRinglimit } from './lib/servers.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `Pipelining on every node of a default 3-node cluster: autocannon -c 50 -p 10 and a 10-deep wrk
pipeline over 10,000 identifiers (limit 1,000,000, fixed window) against each node in turn:
answers/s, connections closed, statuses, answers in order, counts within the limit. Then server
CPU per decision, 3 nodes round-robin (a shared limit, and one too small to share) against one
node, same run. Needs wrk, bench/node_modules (npm ci in bench/) and the build (npm run build).`,
  options: {
    seconds: { type: 'number', min: 1, default: 10, help: 'seconds per load run' },
    connections: { type: 'number', min: 1, default: 50, help: 'connections per run' },
    pipelining: { type: 'number', min: 1, default: 10, help: 'requests each connection sends before waiting for an answer' },
    keys: { type: 'number', min: 1, default: 10000, help: 'identifiers per run' },
    limit: { type: 'number', min: 1, default: 1000000, help: 'the limit of every request' },
    window: {
      type: 'number',
      min: 1,
      arg: 'S',
      default: 10,
      help: "the limit's window, seconds (fixed window); runs begin in a window that began after the cluster was up",
    },
    rounds: { type: 'number', min: 0, default: 3, help: 'rounds of the CPU rows (0: none)' },
    fresh: {
      type: 'boolean',
      help: "start at once, in the window current when the cluster came up (what a user sees right after starting it: each node's first request of a key there goes to its owner)",
    },
    baseline: {
      type: 'string',
      arg: 'DIR',
      defaultText: "this checkout's build",
      help: 'run the build of another checkout (DIR/dist/src/main.js) instead, for a before column',
    },
  },
})
if (!wrkVersion()) {
  process.stderr.write('bench/pipelining.mjs: needs wrk (apt-get install -y wrk)\n')
  process.exit(2)
}
installCleanup()
const main = args.baseline !== undefined ? buildMain(args.baseline) : ringlimitMain
const conditions = new RunConditions()
const apiKey = makeApiKey()
const headers = { authorization: `Bearer ${apiKey}` }
const tmp = mkdtempSync(path.join(tmpdir(), 'ringlimit-bench-pipe-'))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const body = (id, limit = args.limit) => ({ namespace: 'bench', identifier: id, limit, duration: args.window })

const cluster = await startRinglimit({ apiKey, nodes: 3, main })
const single = args.rounds > 0 ? await startRinglimit({ apiKey, nodes: 1, main }) : undefined
// A node shares a key's window when the window began a second or more after its connections
// came up (docs/api.md, Shares): start in such a window.
if (!args.fresh) {
  const D = args.window * 1000
  const next = Math.ceil((Date.now() + 1500) / D) * D
  process.stdout.write(`waiting ${((next - Date.now()) / 1000).toFixed(1)} s for a window that began after the cluster was up\n`)
  await sleep(next - Date.now() + 50)
}

async function sums(url) {
  const out = {}
  for (const line of (await get(url + '/metrics', 3000)).body.split('\n')) {
    const m = /^(ringlimit_forwarded_total\{outcome="([a-z_]+)"\}|ringlimit_forward_given_back_total|ringlimit_requests_total\{[^}]*\}) ([0-9.e+]+)$/.exec(line)
    if (!m) continue
    const name = m[2] ?? (m[1].startsWith('ringlimit_requests_total') ? 'requests' : 'given_back')
    out[name] = (out[name] ?? 0) + Number(m[3])
  }
  return out
}

/**
 * `bursts` writes of `depth` requests with distinct identifiers on one connection: the
 * answers must name them in order, and the connection must stay open.
 */
function inOrder(url, bursts, depth, prefix) {
  const { port } = new URL(url)
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), '127.0.0.1')
    let buf = Buffer.alloc(0)
    let sent = []
    let got = 0
    let mismatches = 0
    let burst = 0
    let closed = false
    const send = () => {
      sent = Array.from({ length: depth }, (_, i) => `${prefix}${burst}-${i}`)
      socket.write(
        sent
          .map((id) => {
            const b = JSON.stringify(body(id))
            return `POST /limit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`
          })
          .join(''),
      )
    }
    const finish = () => {
      socket.destroy()
      resolve({ answered: got, mismatches, closed })
    }
    socket.on('connect', send)
    socket.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk])
      for (;;) {
        const end = buf.indexOf('\r\n\r\n')
        if (end < 0) return
        const len = Number(/content-length: *(\d+)/i.exec(buf.subarray(0, end).toString())?.[1] ?? 0)
        if (buf.length < end + 4 + len) return
        const answer = JSON.parse(buf.subarray(end + 4, end + 4 + len).toString())
        buf = buf.subarray(end + 4 + len)
        if (answer.data?.identifier !== sent[got % depth]) mismatches++
        if (++got % depth === 0) {
          if (++burst === bursts) return finish()
          send()
        }
      }
    })
    socket.on('close', () => {
      closed = got < bursts * depth
      finish()
    })
    socket.on('error', () => {})
    setTimeout(finish, 30000).unref()
  })
}

/** One row of the table: a load run's answers and the node's forward outcomes over it (metric sums before and after). */
function loadRow(node, loader, res, before, after, inOrderText) {
  const d = (k) => (after[k] ?? 0) - (before[k] ?? 0)
  return {
    node,
    loader,
    'answers/s': Math.round(res.rps),
    answers: res.completed,
    'ok 200': res.status['200'] ?? 0,
    other: res.completed - (res.status['200'] ?? 0),
    'closed conns': res.closed,
    errors: res.errors,
    'p99 ms': (res.latencyUs.p99 / 1000).toFixed(1),
    shared: d('shared'),
    forwarded: d('allowed') + d('blocked') + d('cached_block') + d('timeout') + d('unavailable') + d('error') + d('invalid'),
    'given back': d('given_back'),
    'in order': inOrderText,
  }
}

// Part 1: each node in turn, both loaders.
const rows = []
for (const [i, url] of cluster.urls.entries()) {
  for (const loader of ['autocannon', 'wrk']) {
    const before = await sums(url)
    const watch = new GroupWatch(cluster.pgids)
    watch.refresh()
    let cpu0 = 0
    const res = await runLoad(
      {
        loader,
        urls: [url],
        connections: args.connections,
        durationSec: args.seconds,
        headers,
        bodySpec: { namespace: 'bench', limit: args.limit, duration: args.window, idSpace: args.keys, idPrefix: `n${i + 1}${loader[0]}-` },
        tmpDir: tmp,
        pipelining: args.pipelining,
      },
      () => (cpu0 = watch.cpuTicks()),
    )
    conditions.add(`pipelined on n${i + 1}`, (watch.cpuTicks() - cpu0) / clockTicks(), res.wallSec, 3)
    const after = await sums(url) // before the order check, whose requests are not the run's
    const order = await inOrder(url, 100, args.pipelining, `order-n${i + 1}${loader[0]}-`)
    const row = loadRow(
      `n${i + 1}`,
      loader,
      res,
      before,
      after,
      `${order.answered - order.mismatches}/${100 * args.pipelining}${order.closed ? ' (closed)' : ''}`,
    )
    rows.push(row)
    console.log(JSON.stringify(row))
  }
}

// A hot key: every request of the run for one identifier that another node owns (n2), on n1:
// one share does not last a run, so the owner's grants must keep up.
{
  const { HashRing } = await import('../dist/src/shard/ring/ring.js')
  const { ringKeyOf } = await import('../dist/src/shard/ring/state-key.js')
  // The ring as the nodes hold it: members are named by their peer addresses, not n1..n3.
  const { members } = JSON.parse((await get(cluster.urls[0] + '/cluster', 2000, headers)).body).data
  const n2 = members.find((m) => m.url === cluster.urls[1]).id
  const ring = new HashRing(members.map((m) => m.id))
  let prefix = ''
  for (let k = 0; prefix === ''; k++) if (ring.owner(ringKeyOf('bench', `hot${k}-0`)) === n2) prefix = `hot${k}-`
  const url = cluster.urls[0]
  const before = await sums(url)
  const res = await runLoad({
    loader: 'autocannon',
    urls: [url],
    connections: args.connections,
    durationSec: args.seconds,
    headers,
    bodySpec: { namespace: 'bench', limit: args.limit, duration: args.window, idSpace: 1, idPrefix: prefix },
    tmpDir: tmp,
    pipelining: args.pipelining,
  })
  const row = loadRow('n1, one key owned by n2', 'autocannon', res, before, await sums(url), '-')
  rows.push(row)
  console.log(JSON.stringify(row))
}

// Counts within the limit: sampled keys, peeked on every node; the owner's count is the
// largest (docs/api.md, Shares: it includes the other members' shares).
let maxCount = 0
for (const [i] of cluster.urls.entries())
  for (const loader of ['a', 'w'])
    for (let k = 0; k < args.keys; k += Math.max(1, Math.floor(args.keys / 20))) {
      for (const url of cluster.urls) {
        const r = await postJson(url + '/limit', { ...body(`n${i + 1}${loader}-${k}`), cost: 0 }, headers)
        const c = JSON.parse(r.body).data?.count
        if (typeof c === 'number' && c > maxCount) maxCount = c
      }
    }

// Part 2: CPU per decision, round-robin over the 3 nodes, against one node.
const cpuRows = [
  ['1 node, limit ' + args.limit.toLocaleString('en'), () => single.urls, args.limit, () => single.pgids],
  ['3 nodes round-robin, limit ' + args.limit.toLocaleString('en') + ' (shared)', () => cluster.urls, args.limit, () => cluster.pgids],
  ['3 nodes round-robin, limit 2,000 (not shared: forwarded)', () => cluster.urls, 2000, () => cluster.pgids],
]
const cpu = cpuRows.map(() => [])
for (let round = 0; round < args.rounds; round++) {
  for (const [k, [label, urls, limit, pgids]] of cpuRows.entries()) {
    const watch = new GroupWatch(pgids())
    watch.refresh()
    let cpu0 = 0
    const res = await runLoad(
      {
        loader: 'wrk',
        urls: urls(),
        connections: 48,
        durationSec: args.seconds,
        headers,
        bodySpec: { namespace: 'bench', limit, duration: args.window, idSpace: args.keys, idPrefix: `cpu${round}-${k}-` },
        tmpDir: tmp,
      },
      () => (cpu0 = watch.cpuTicks()),
    )
    const cpuSec = (watch.cpuTicks() - cpu0) / clockTicks()
    conditions.add(label, cpuSec, res.wallSec, urls().length)
    cpu[k].push({ us: (cpuSec * 1e6) / res.completed, rps: res.rps, ok: (res.status['200'] ?? 0) / res.completed })
    console.log(`round ${round + 1} ${label}: ${Math.round(res.rps)} req/s, ${((cpuSec * 1e6) / res.completed).toFixed(1)} µs CPU/decision`)
  }
}

console.log(`\npipelining bench — ${new Date().toISOString()} — node ${process.version}${args.baseline ? `, build ${args.baseline}` : ''}`)
console.log(
  `each node of a 3-node cluster (REPLICAS=2) in turn: ${args.connections} connections × ${args.pipelining} pipelined, ${args.seconds} s, ${args.keys} identifiers, limit ${args.limit}, window ${args.window} s${args.fresh ? ', starting in the window current at start-up' : ''}\n`,
)
console.log('| node | loader | answers/s | answers | 200 | other | closed conns | errors | p99 ms | shared | forwarded | given back | in order |')
console.log('|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|')
for (const r of rows) console.log(`| ${Object.values(r).join(' | ')} |`)
console.log(`\nlargest count of a sampled key, any node: ${maxCount} (limit ${args.limit})`)
if (args.rounds > 0) {
  console.log(`\nserver CPU per decision, wrk, 48 connections, medians of ${args.rounds} rounds (ratios per round, then the median)\n`)
  console.log('| row | req/s | µs CPU/decision | × 1 node |')
  console.log('|---|--:|--:|--:|')
  for (const [k, [label]] of cpuRows.entries()) {
    const ratio = median(cpu[k].map((r, j) => r.us / cpu[0][j].us))
    console.log(`| ${label} | ${Math.round(median(cpu[k].map((r) => r.rps)))} | ${median(cpu[k].map((r) => r.us)).toFixed(1)} | ${ratio.toFixed(2)}× |`)
  }
}
console.log('')
conditions.print()
rmSync(tmp, { recursive: true, force: true })
killAllSync()
process.exit(0)

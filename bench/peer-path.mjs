// Where a forwarded and a replicated decision spend their CPU (issue 23): 3 nodes with the
// defaults (REPLICAS=2) at fixed request rates, in two layouts, each against one node
// deciding the same requests locally at the same rate, same run:
//
//  - roles: every request goes to node A for keys owned by node B whose replica is node C,
//    so each node plays one role: A forwards, B decides and replicates, C keeps the copy.
//    Per node: CPU per decision, read and write syscalls per decision (/proc/<pid>/io), and
//    from the nodes' metrics the decisions per DECIDE frame and states per REPLICATE call.
//  - round-robin: requests spread evenly over the three nodes (a Kubernetes Service), keys
//    of every owner: the cluster's CPU per decision against one node's.
//
// With --cpu-prof DIR each cluster node runs under `node --cpu-prof`; its profile is summed
// by concern (HMAC, socket writes, timers, promises, GC, ringlimit's own parts) and printed.
//
//   npm run build && node bench/peer-path.mjs [--rates 1000,10000,20000,50000] [--seconds 6] [--cpu-prof DIR]
import { mkdirSync, readFileSync, readdirSync } from 'node:fs'
import path from 'node:path'
import { installCleanup, killAllSync, spawnTracked, stopTracked } from './lib/children.mjs'
import { bodyParts } from './lib/bodies.mjs'
import { RunConditions } from './lib/conditions.mjs'
import { summarizeProfile } from './lib/cpu-profile.mjs'
import { get } from './lib/net.mjs'
import { cpuNs } from './lib/procfs.mjs'
import { benchOptions } from './lib/options.mjs'
import { buildMain, makeApiKey, ringlimitMain, startRinglimit } from './lib/servers.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `Where a forwarded and a replicated decision spend their CPU: 3 nodes (REPLICAS=2 by default)
at fixed rates, one node forwarding to an owner that replicates to a third ("roles"), and requests
spread over all three ("round-robin"), each against one node deciding locally at the same rate.
CPU and syscalls per decision per node, decisions per frame, and with --cpu-prof a profile of each
node summed by concern. Needs the build (npm run build); the load comes at a steady rate from lib/paced-driver.mjs.`,
  options: {
    rates: { type: 'string', arg: 'LIST', default: '1000,10000,20000,50000', help: 'request rates to run, per second, comma-separated' },
    seconds: { type: 'number', min: 1, default: 6, help: 'measured seconds per row' },
    warmup: { type: 'number', min: 0, default: 2, help: 'seconds of load before each measurement' },
    connections: { type: 'number', min: 1, default: 48, help: 'connections of the load generator' },
    replicas: { type: 'number', min: 1, default: 2, help: 'REPLICAS of the cluster' },
    layouts: { type: 'string', arg: 'LIST', default: 'roles,round-robin', help: 'layouts to run: roles, round-robin' },
    'cpu-prof': {
      type: 'string',
      arg: 'DIR',
      defaultText: 'none',
      help: 'run the cluster nodes under node --cpu-prof, profiles in DIR, and print their breakdown',
    },
    build: { type: 'string', arg: 'DIR', defaultText: 'this checkout', help: "measure another checkout's build (DIR/dist/src/main.js) instead" },
    env: { type: 'string', arg: 'K=V,...', defaultText: 'none', help: 'extra settings of the cluster nodes, e.g. REPLICATION_DELAY_MS=0' },
    baseline: {
      type: 'string',
      arg: 'DIR',
      defaultText: 'none',
      help: "also a cluster of another checkout's build, measured in the same rows (before/after in one run)",
    },
    'baseline-env': {
      type: 'string',
      arg: 'K=V,...',
      defaultText: 'none',
      help: 'settings of the baseline cluster (alone: this build with these settings as the baseline)',
    },
  },
})
installCleanup()
const conditions = new RunConditions()
const RATES = args.rates.split(',').map(Number)
const LAYOUTS = args.layouts.split(',')
const PROF = args['cpu-prof'] === undefined ? undefined : path.resolve(args['cpu-prof'])
const main = args.build === undefined ? ringlimitMain : buildMain(args.build, '--build')
const { HashRing } = await import('../dist/src/shard/ring/ring.js')
const { ringKeyOf } = await import('../dist/src/shard/ring/state-key.js')
const apiKey = makeApiKey()
const headers = { authorization: `Bearer ${apiKey}` }
const here = path.dirname(new URL(import.meta.url).pathname)
const NS = 'bench'
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Read and write syscalls of `pid` so far (/proc/<pid>/io: every thread of the process). */
function syscalls(pid) {
  const t = readFileSync(`/proc/${pid}/io`, 'utf8')
  return { r: Number(/syscr: (\d+)/.exec(t)[1]), w: Number(/syscw: (\d+)/.exec(t)[1]) }
}
/** Context switches of the main thread (the event loop) of `pid` so far: each one a wake-up or a preemption. */
function switches(pid) {
  const t = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(t)[1]) + Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(t)[1])
}
const sample = (pid) => ({ ns: cpuNs(pid), cs: switches(pid), ...syscalls(pid) })

/** Sum of the named series of a node's /metrics (labels ignored). */
async function metrics(url) {
  const text = (await get(url + '/metrics', 3000)).body
  const out = {}
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$/.exec(line)
    if (m && !line.includes('le="')) out[m[1]] = (out[m[1]] ?? 0) + Number(m[2])
  }
  return out
}

/** Identifiers whose owner and replicas (in order) are `placement`, on the ring of `members`. */
function idsPlacedOn(members, placement, n) {
  const ring = new HashRing(members)
  const out = []
  const got = []
  for (let i = 0; out.length < n; i++) {
    const id = `pp-${i}`
    const k = ring.successors(ringKeyOf(NS, id), placement.length, got)
    let ok = k === placement.length
    for (let j = 0; ok && j < k; j++) ok = got[j] === placement[j]
    if (ok) out.push(id)
  }
  return out
}

async function start(nodes, label, variant = variants[0]) {
  const nodeArgs = PROF !== undefined && nodes > 1 ? ['--cpu-prof', '--cpu-prof-dir', path.join(PROF, label)] : []
  if (nodeArgs.length > 0) mkdirSync(path.join(PROF, label), { recursive: true })
  const extraEnv = nodes > 1 ? { REPLICAS: String(args.replicas), ...variant.env } : {}
  const spawnedAt = Date.now()
  const s = await startRinglimit({ apiKey, nodes, extraEnv, nodeArgs, main: variant.main })
  if (nodes > 1) {
    // Until every node has every member on its ring.
    for (let t = 0; ; t++) {
      const ms = await Promise.all(s.urls.map(metrics))
      if (ms.every((m) => m.ringlimit_ring_members === nodes)) break
      if (t > 300) throw new Error('cluster did not form')
      await sleep(100)
    }
  }
  const names = await Promise.all(s.urls.map(async (u) => JSON.parse((await get(u + '/cluster', 2000, headers)).body).data))
  return { ...s, spawnedAt, selves: names.map((c) => c.self), members: names[0]?.members.map((m) => m.id) ?? [] }
}
async function stop(s) {
  // A profile is written when the process exits: give each node time to leave gracefully,
  // one at a time (nodes leaving together wait for each other's hand-offs).
  if (PROF === undefined) await Promise.all(s.recs.map((r) => stopTracked(r)))
  else for (const r of s.recs) await stopTracked(r, 20000)
}

/**
 * Load `urls` at a steady `rate` (split evenly; lib/paced-driver.mjs) with `bodySpec`; per pid:
 * CPU ns net of what it burns idle, syscalls and context switches; metrics of `metricUrls`
 * before and after the measured seconds. Warm-up first, in the same driver run.
 */
async function measure(label, urls, pids, rate, bodySpec, metricUrls = urls) {
  // What the nodes burn doing nothing (heartbeats, sweeps), subtracted: at 1k/s it is not negligible.
  const i0 = pids.map(cpuNs)
  const t0 = performance.now()
  await sleep(2000)
  const idleNsPerSec = pids.map((p, i) => (cpuNs(p) - i0[i]) / ((performance.now() - t0) / 1000))
  const [head, tail] = bodyParts(bodySpec)
  const driver = spawnTracked(
    'paced driver',
    process.execPath,
    [
      path.join(here, 'lib/paced-driver.mjs'),
      JSON.stringify({
        urls: urls.map((u) => u + '/limit'),
        rate,
        seconds: args.seconds,
        warmup: args.warmup,
        connections: args.connections,
        headers,
        head,
        tail,
        ids: bodySpec.ids,
        idPrefix: bodySpec.idPrefix,
        idSpace: bodySpec.idSpace,
      }),
    ],
    { stdout: 'all' },
  )
  let s0
  let m0
  let from = 0
  driver.child.stdout.on('data', (d) => {
    if (s0 === undefined && String(d).includes('STARTED')) {
      s0 = pids.map(sample)
      from = Date.now()
      m0 = Promise.all(metricUrls.map(metrics))
    }
  })
  await driver.exited
  const s1 = pids.map(sample)
  const to = Date.now()
  const m1 = await Promise.all(metricUrls.map(metrics))
  const line = driver.out.split('\n').find((l) => l.startsWith('BENCHJSON '))
  if (line === undefined || s0 === undefined) throw new Error(`${label}: the driver gave no result: ${(driver.err || driver.out).slice(-300)}`)
  const res = JSON.parse(line.slice('BENCHJSON '.length))
  const m0v = await m0
  const n = res.completed
  const rawNs = s1.reduce((a, s, i) => a + s.ns - s0[i].ns, 0)
  conditions.add(label, rawNs / 1e9, res.wallSec, pids.length)
  const ok = res.status['200'] ?? 0
  if (ok < n * 0.99) throw new Error(`${label}: not all 200: ${JSON.stringify(res.status)}`)
  return {
    n,
    late: res.late,
    window: [from, to],
    rps: n / res.wallSec,
    latencyUs: res.latencyUs,
    perPid: pids.map((p, i) => ({
      us: (s1[i].ns - s0[i].ns - idleNsPerSec[i] * res.wallSec) / 1e3 / n,
      rawUs: (s1[i].ns - s0[i].ns) / 1e3 / n,
      reads: (s1[i].r - s0[i].r) / n,
      writes: (s1[i].w - s0[i].w) / n,
      switches: (s1[i].cs - s0[i].cs) / n,
    })),
    delta: (i, k) => (m1[i][k] ?? 0) - (m0v[i][k] ?? 0),
  }
}

const f1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : '–')
const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : '–')
const ms = (us) => (us / 1000).toFixed(2)
const results = []

/** The clusters compared in each row: this build, and with --baseline / --baseline-env another build or setting. */
const parseEnv = (list) =>
  Object.fromEntries(
    (list ?? '')
      .split(',')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  )
const variants = [{ name: args.build === undefined ? 'this build' : args.build, main, env: parseEnv(args.env) }]
if (args.baseline !== undefined || args['baseline-env'] !== undefined)
  variants.push({
    name: `baseline ${args.baseline ?? ''} ${args['baseline-env'] ?? ''}`.trim(),
    main: args.baseline === undefined ? main : buildMain(args.baseline),
    env: parseEnv(args['baseline-env']),
  })

for (const rate of RATES) {
  for (const layout of LAYOUTS) {
    const label = `${layout}-${rate}`
    const single = await start(1)
    const clusters = []
    for (const [v, variant] of variants.entries()) clusters.push(await start(3, `${label}-${v}`, variant))
    try {
      const roles = layout === 'roles'
      // A limit under 2,048: never answered from shares (docs/api.md), so every decision for another
      // owner's key takes the peer path this bench measures.
      const spec = { namespace: NS, limit: 2000, duration: 3600, idPrefix: `${label}-`, idSpace: 10000 }
      const local = await measure(`1 node, ${label}`, single.urls, single.pgids, rate, spec)
      // Variants take turns going first from one rate to the next, so drift favours none.
      const order = variants.map((_, v) => v)
      if (RATES.indexOf(rate) % 2 === 1) order.reverse()
      for (const v of order) {
        const cluster = clusters[v]
        const [A, B, C] = cluster.selves
        void A
        // roles: keys B owns and C keeps the copy of, all sent to A. round-robin: any keys, all nodes.
        const ids = roles ? idsPlacedOn(cluster.members, args.replicas > 1 ? [B, C] : [B], 2000) : undefined
        const urls = roles ? [cluster.urls[0]] : cluster.urls
        const c = await measure(
          `3 nodes, ${label}, ${variants[v].name}`,
          urls,
          cluster.pgids,
          rate,
          { ...spec, idPrefix: `${label}-c${v}-`, ...(ids ? { ids } : {}) },
          cluster.urls,
        )
        const localUs = local.perPid[0].us
        const row = {
          variant: variants[v].name,
          v,
          n: c.n,
          rate,
          layout,
          label: `${label}-${v}`,
          pgids: cluster.pgids,
          window: c.window.map((t) => t - cluster.spawnedAt),
          rps: c.rps,
          late: c.late,
          localRps: local.rps,
          localUs,
          local: local.perPid[0],
          latencyUs: c.latencyUs,
          localLatencyUs: local.latencyUs,
          nodes: [],
        }
        const all = (k) => cluster.urls.reduce((s, _, i) => s + c.delta(i, k), 0)
        const frames = all('ringlimit_peer_decide_frame_decisions_count')
        const framed = all('ringlimit_peer_decide_frame_decisions_sum')
        // NaN against a build without the counter (a baseline before it).
        const reads = all('ringlimit_peer_decide_reads_total')
        const calls = all('ringlimit_replication_batch_states_count')
        const states = all('ringlimit_replication_batch_states_sum')
        row.frames = {
          forwarded: all('ringlimit_forwarded_total') / c.n,
          framesPerDecision: frames / c.n,
          perFrame: framed / frames,
          framesPerRead: frames / reads,
          callsPerDecision: calls / c.n,
          statesPerCall: states / calls,
          degraded: all('ringlimit_degraded_total'),
        }
        const roleNames = roles ? ['A: forwards', 'B: owner', args.replicas > 1 ? 'C: replica' : 'C: idle'] : ['n1', 'n2', 'n3']
        c.perPid.forEach((p, i) => row.nodes.push({ role: roleNames[i], ...p }))
        row.clusterUs = c.perPid.reduce((s, p) => s + p.us, 0)
        results.push(row)
        console.log(
          `${label} (${row.variant}): ${Math.round(c.rps)} decisions/s; cluster ${f1(row.clusterUs)} µs/decision vs 1 node ${f1(localUs)} (${f2(row.clusterUs / localUs)}x); ` +
            `${f2(row.frames.perFrame)} decisions per DECIDE frame, ${f2(row.frames.framesPerRead)} frames per owner read, ${f2(row.frames.statesPerCall)} states per REPLICATE call; p50/p99 ${ms(c.latencyUs.p50)}/${ms(c.latencyUs.p99)} ms (1 node ${ms(local.latencyUs.p50)}/${ms(local.latencyUs.p99)})`,
        )
      }
    } finally {
      for (const cluster of clusters) await stop(cluster)
      await stop(single)
    }
    if (PROF !== undefined) {
      for (const row of results.filter((r) => r.rate === rate && r.layout === layout)) {
        const dir = path.join(PROF, row.label)
        const files = readdirSync(dir).filter((x) => x.endsWith('.cpuprofile'))
        // File names carry the pid: CPU.<date>.<time>.<pid>.<tid>.<seq>.cpuprofile
        const byPid = new Map(files.map((x) => [Number(x.split('.')[3]), path.join(dir, x)]))
        row.profiles = row.pgids.map((pid, i) => {
          const file = byPid.get(pid)
          return file === undefined ? null : { role: row.nodes[i].role, file, ...summarizeProfile(file, row.window[0], row.window[1]) }
        })
      }
    }
  }
}
console.log(`\npeer path — ${new Date().toISOString()} — ${args.seconds} s per row, ${args.connections} connections, REPLICAS=${args.replicas}`)
console.log(
  '\n| build | layout | rate asked | decisions/s | node | CPU µs/decision (raw) | × 1 node local | write syscalls/decision | read syscalls/decision | context switches/decision |',
)
console.log('|:--|:--|--:|--:|:--|--:|--:|--:|--:|--:|')
for (const r of results) {
  if (r.v === 0)
    console.log(
      `| – | ${r.layout} | ${r.rate} | ${Math.round(r.localRps)} | 1 node, local | ${f1(r.localUs)} (${f1(r.local.rawUs)}) | 1.00× | ${f2(r.local.writes)} | ${f2(r.local.reads)} | ${f2(r.local.switches)} |`,
    )
  for (const n of r.nodes)
    console.log(
      `| ${r.variant} | ${r.layout} | ${r.rate} | ${Math.round(r.rps)} | ${n.role} | ${f1(n.us)} (${f1(n.rawUs)}) | ${f2(n.us / r.localUs)}× | ${f2(n.writes)} | ${f2(n.reads)} | ${f2(n.switches)} |`,
    )
  console.log(
    `| ${r.variant} | ${r.layout} | ${r.rate} | ${Math.round(r.rps)} | **3 nodes, all** | **${f1(r.clusterUs)}** | **${f2(r.clusterUs / r.localUs)}×** | ${f2(r.nodes.reduce((s, n) => s + n.writes, 0))} | ${f2(r.nodes.reduce((s, n) => s + n.reads, 0))} | ${f2(r.nodes.reduce((s, n) => s + n.switches, 0))} |`,
  )
}
console.log(
  '\n| build | layout | rate asked | forwarded share | DECIDE frames/decision | decisions/DECIDE frame | DECIDE frames/owner read | REPLICATE calls/decision | states/call | degraded | p50 / p99 ms (1 node) |',
)
console.log('|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|')
for (const r of results) {
  const x = r.frames
  console.log(
    `| ${r.variant} | ${r.layout} | ${r.rate} | ${f2(x.forwarded)} | ${f2(x.framesPerDecision)} | ${f2(x.perFrame)} | ${f2(x.framesPerRead)} | ${f2(x.callsPerDecision)} | ${f2(x.statesPerCall)} | ${x.degraded} | ${ms(r.latencyUs.p50)} / ${ms(r.latencyUs.p99)} (${ms(r.localLatencyUs.p50)} / ${ms(r.localLatencyUs.p99)}) |`,
  )
}
if (PROF !== undefined) {
  for (const r of results) {
    for (const p of r.profiles ?? []) {
      if (p === null) continue
      console.log(
        `\nprofile, ${r.variant}, ${r.layout} at ${r.rate}/s, ${p.role}: ${(p.busyMs / 1000).toFixed(2)} s busy while measured, ${f1((p.busyMs * 1000) / r.n)} µs per decision (${p.file})`,
      )
      for (const [name, t] of p.concerns)
        if (t / p.busyMs >= 0.005) console.log(`  ${((100 * t) / p.busyMs).toFixed(1).padStart(5)} %  ${f1((t * 1000) / r.n).padStart(5)} µs  ${name}`)
    }
  }
}
conditions.print()
killAllSync()
process.exit(0)

#!/usr/bin/env node
// Memory scenarios of ringlimit (issue 5, item 4):
//  1. bytes per stored key: RSS before and after driving N (1 M) distinct identifiers
//     through one node (MAX_KEYS=2000000), divided by the growth of its
//     ringlimit_stored_keys gauge;
//  2. flood: never-repeating identifiers for 60 s with MAX_KEYS=100000, RSS sampled every
//     second: does it stay flat once the table is full (the bound and eviction work)?
//  3. with --cluster: bytes per key of a 3-node cluster with REPLICAS=2 (issue 39, item 5):
//     N distinct keys of limit 10 (no share answers them: every key is owned on one node and
//     copied on another) spread over the three nodes, RSS summed over the nodes once settled,
//     before and after, divided by N. Only this scenario runs then.
//
//   node bench/memory.mjs [--quick] [--keys N] [--flood S] [--loader autocannon|wrk]
//                         [--node-args=--max-old-space-size=128]  (flood only: tells a leak
//                         from a lazy GC — a leak dies at the cap, a lazy heap stays under it)
//   node bench/memory.mjs --cluster [--keys 300000] [--build DIR]  (DIR: also another checkout's
//                         build, filled after this one in the same run: before/after)
// Also run by `node bench/run.mjs --memory`. Standalone, it writes bench/results/memory.json.
import { existsSync, mkdirSync, writeFileSync, mkdtempSync, rmSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { benchOptions } from './lib/options.mjs'
import { execFileSync } from 'node:child_process'

const benchDir = new URL('.', import.meta.url).pathname
const TARGET_BYTES_PER_KEY = 150

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function loadLibs() {
  const children = await import('./lib/children.mjs')
  const procfs = await import('./lib/procfs.mjs')
  const load = await import('./lib/load.mjs')
  const net = await import('./lib/net.mjs')
  const servers = await import('./lib/servers.mjs')
  const conditions = await import('./lib/conditions.mjs')
  return { ...children, ...procfs, ...load, ...net, ...servers, ...conditions }
}

/** GET /metrics → { metric name: value summed over labels }. */
async function scrape(L, url) {
  const r = await L.get(url + '/metrics', 5000)
  const out = {}
  for (const line of r.body.split('\n')) {
    const m = /^([a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$/.exec(line)
    if (m) out[m[1]] = (out[m[1]] ?? 0) + Number(m[3])
  }
  return out
}
/**
 * Where a node's bytes are, from GET /metrics and /proc: V8's heap (used, and committed by
 * space: the young generation is "new"), memory outside it (typed arrays' buffers), the
 * tables' own estimate (ringlimit_stored_bytes) and, from /proc/PID/smaps_rollup, RSS.
 */
async function memoryParts(L, urls, pgids) {
  const parts = { heapUsed: 0, heapTotal: 0, newSpace: 0, oldSpaceUsed: 0, external: 0, tables: 0, rss: 0 }
  for (const url of urls) {
    const r = await L.get(url + '/metrics', 5000)
    for (const line of r.body.split('\n')) {
      const m = /^([a-z_]+)(?:\{([^}]*)\})?\s+([0-9.eE+-]+)$/.exec(line)
      if (m === null) continue
      const v = Number(m[3])
      if (m[1] === 'nodejs_heap_size_used_bytes') parts.heapUsed += v
      else if (m[1] === 'nodejs_heap_size_total_bytes') parts.heapTotal += v
      else if (m[1] === 'nodejs_external_memory_bytes') parts.external += v
      else if (m[1] === 'ringlimit_stored_bytes') parts.tables += v
      else if (m[1] === 'nodejs_heap_space_size_total_bytes' && /space="new"/.test(m[2] ?? '')) parts.newSpace += v
      else if (m[1] === 'nodejs_heap_space_size_used_bytes' && /space="old"/.test(m[2] ?? '')) parts.oldSpaceUsed += v
    }
  }
  parts.brkHeap = 0
  for (const pid of L.groupMembers(pgids)) {
    try {
      parts.rss += Number(/^Rss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))[1]) * 1024
      // malloc's main arena (brk): what it keeps of freed blocks stays resident
      const heap = /\[heap\]\n(?:.*\n)*?Rss:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/smaps`, 'utf8'))
      if (heap) parts.brkHeap += Number(heap[1]) * 1024
    } catch {
      /* gone */
    }
  }
  return parts
}
const partsPerKey = (a, b, keys) => Object.fromEntries(Object.keys(a).map((k) => [k, Math.round((b[k] - a[k]) / keys)]))

async function gauge(L, url, name) {
  return (await scrape(L, url))[name] ?? null
}
// prom-client's default metrics, when ringlimit exports them: V8 heap in use / reserved.
const heapOf = (m) => ({
  heapUsedMb: m.nodejs_heap_size_used_bytes != null ? m.nodejs_heap_size_used_bytes / 2 ** 20 : null,
  heapTotalMb: m.nodejs_heap_size_total_bytes != null ? m.nodejs_heap_size_total_bytes / 2 ** 20 : null,
  externalMb: m.nodejs_external_memory_bytes != null ? m.nodejs_external_memory_bytes / 2 ** 20 : null,
})

const mb = (kb) => kb / 1024

/**
 * Runs both memory scenarios; returns { bytesPerKey, flood, lines } (lines: printable report).
 * opts: { quick, apiKey, tmpDir, log, loader, keys, floodSec, nodeArgs, conditions (a RunConditions) }
 */
export async function runMemory(opts) {
  const L = await loadLibs()
  const log = opts.log ?? ((m) => process.stderr.write(m + '\n'))
  const loader = opts.loader ?? (L.wrkVersion() ? 'wrk' : 'autocannon')
  const keys = opts.keys ?? (opts.quick ? 200000 : 1000000)
  const floodSec = opts.floodSec ?? (opts.quick ? 20 : 60)
  const apiKey = opts.apiKey ?? L.makeApiKey()
  const headers = { authorization: `Bearer ${apiKey}` }
  const lines = []
  const out = { loader, bytesPerKey: null, flood: null, lines }
  // run.mjs passes its own, so that one report covers every row; standalone, our own.
  const conditions = opts.conditions ?? new L.RunConditions()

  // 1. Bytes per stored key.
  {
    log(`memory: bytes per key — ${keys.toLocaleString('en-US')} distinct identifiers into one node (MAX_KEYS=2000000, ${loader})`)
    const server = await L.startRinglimit({ apiKey, maxKeys: 2000000 })
    try {
      const url = server.urls[0]
      const watch = new L.GroupWatch(server.pgids)
      // Warm up on a few keys (JIT, buffers, connection pools), then settle.
      await L.runLoad({
        loader,
        urls: server.urls,
        connections: 50,
        durationSec: 3,
        headers,
        bodySpec: { namespace: 'mem', limit: 1000000, duration: 3600, idSpace: 1000, idPrefix: 'warm-' },
        tmpDir: opts.tmpDir,
      })
      await sleep(2000)
      const rss0 = watch.rssKb()
      const m0 = await scrape(L, url)
      const keys0 = m0.ringlimit_stored_keys ?? null
      const t0 = performance.now()
      const ticks0 = watch.cpuTicks()
      const r = await L.runLoad({
        loader,
        urls: server.urls,
        connections: 50,
        amount: keys,
        headers,
        timeoutSec: 30,
        // a year: a token bucket's state goes when it is full again, limit 10 of a year after 36.5 days
        // (of an hour it went after 6 minutes, which a fill on a loaded machine outlasts)
        bodySpec: { namespace: 'mem', limit: 10, duration: 31_536_000, idSpace: keys, idPrefix: 'k-' },
        tmpDir: opts.tmpDir,
      })
      const fillSec = (performance.now() - t0) / 1000
      conditions.add('memory: bytes per key fill', (watch.cpuTicks() - ticks0) / L.clockTicks(), fillSec, 1)
      const rssFilled = watch.rssKb()
      await sleep(5000)
      const rss1 = watch.rssKb()
      const m1 = await scrape(L, url)
      const keys1 = m1.ringlimit_stored_keys ?? null
      const h0 = heapOf(m0)
      const h1 = heapOf(m1)
      const hwm = watch.hwmKb()
      if (keys1 == null) throw new Error('ringlimit_stored_keys not found in GET /metrics')
      const dKeys = keys1 - (keys0 ?? 0)
      const perKey = dKeys > 0 ? ((rss1 - rss0) * 1024) / dKeys : null
      const perKeyFilled = dKeys > 0 ? ((rssFilled - rss0) * 1024) / dKeys : null
      out.bytesPerKey = {
        keysDriven: keys,
        requests: r.completed,
        status: r.status,
        errors: r.errors,
        fillSec,
        storedKeysBefore: keys0,
        storedKeysAfter: keys1,
        rssBeforeMb: mb(rss0),
        rssFilledMb: mb(rssFilled),
        rssSettledMb: mb(rss1),
        hwmMb: mb(hwm),
        bytesPerKey: perKey,
        bytesPerKeyRightAfterFill: perKeyFilled,
        targetBytesPerKey: TARGET_BYTES_PER_KEY,
        heapBefore: h0,
        heapAfter: h1,
        // V8 heap in use after ÷ keys: includes garbage not yet collected, so also an upper bound.
        heapUsedBytesPerKey: h0.heapUsedMb != null && dKeys > 0 ? ((h1.heapUsedMb - h0.heapUsedMb) * 2 ** 20) / dKeys : null,
      }
      lines.push(
        `bytes per stored key: ${perKey == null ? '–' : perKey.toFixed(0)} B ` +
          `(RSS ${mb(rss0).toFixed(0)} → ${mb(rss1).toFixed(0)} MB for +${dKeys.toLocaleString('en-US')} stored keys, 5 s after the fill; ` +
          `${perKeyFilled?.toFixed(0)} B right after it; V8 heap in use +${out.bytesPerKey.heapUsedBytesPerKey?.toFixed(0) ?? '–'} B per key; target ≤ ${TARGET_BYTES_PER_KEY} B) — ` +
          `${r.completed.toLocaleString('en-US')} requests in ${fillSec.toFixed(1)} s, statuses ${JSON.stringify(r.status)}, errors ${r.errors}`,
      )
      log(`memory: ${lines.at(-1)}`)
    } finally {
      await server.stop()
    }
  }

  // 2. Flood of never-repeating identifiers against a bounded table.
  {
    const maxKeys = 100000
    log(`memory: flood — ${floodSec} s of never-repeating identifiers, MAX_KEYS=${maxKeys} (${loader})`)
    const server = await L.startRinglimit({ apiKey, maxKeys, nodeArgs: opts.nodeArgs ?? [] })
    try {
      const url = server.urls[0]
      const watch = new L.GroupWatch(server.pgids)
      const samples = []
      let stop = false
      const t0 = performance.now()
      const ticks0 = watch.cpuTicks()
      const sampler = (async () => {
        while (!stop) {
          const t = (performance.now() - t0) / 1000
          let m = {}
          try {
            m = await scrape(L, url)
          } catch {
            /* busy */
          }
          samples.push({ t: Math.round(t * 10) / 10, rssMb: mb(watch.rssKb()), storedKeys: m.ringlimit_stored_keys ?? null, ...heapOf(m) })
          await sleep(Math.max(0, samples.length * 1000 - (performance.now() - t0)))
        }
      })()
      const r = await L.runLoad({
        loader,
        urls: server.urls,
        connections: 50,
        durationSec: floodSec,
        headers,
        bodySpec: { namespace: 'flood', limit: 10, duration: 3600, idSpace: 1e15, idPrefix: 'f-' },
        tmpDir: opts.tmpDir,
      })
      conditions.add('memory: flood', (watch.cpuTicks() - ticks0) / L.clockTicks(), (performance.now() - t0) / 1000, 1)
      stop = true
      await sampler
      const evictions = await gauge(L, url, 'ringlimit_evictions_total')
      const storedEnd = await gauge(L, url, 'ringlimit_stored_keys')
      const mean = (xs, k = 'rssMb') => xs.reduce((s, x) => s + (x[k] ?? 0), 0) / Math.max(1, xs.length)
      const first = samples.filter((s) => s.t < 10)
      const last = samples.filter((s) => s.t >= samples.at(-1).t - 10)
      const fullAt = samples.find((s) => s.storedKeys != null && s.storedKeys >= maxKeys * 0.99)?.t ?? null
      const afterFull = fullAt == null ? first : samples.filter((s) => s.t >= fullAt && s.t < fullAt + 10)
      const growthFirst = mean(last) / mean(first) - 1
      const growthAfterFull = mean(last) / mean(afterFull) - 1
      const flat = growthAfterFull <= 0.1
      out.flood = {
        seconds: floodSec,
        maxKeys,
        requests: r.completed,
        rps: r.rps,
        status: r.status,
        errors: r.errors,
        evictions,
        storedKeysEnd: storedEnd,
        tableFullAtSec: fullAt,
        rssFirst10sMb: mean(first),
        rssAfterFull10sMb: mean(afterFull),
        rssLast10sMb: mean(last),
        rssPeakMb: Math.max(...samples.map((s) => s.rssMb)),
        heapUsedAfterFull10sMb: mean(afterFull, 'heapUsedMb'),
        heapUsedLast10sMb: mean(last, 'heapUsedMb'),
        heapTotalAfterFull10sMb: mean(afterFull, 'heapTotalMb'),
        heapTotalLast10sMb: mean(last, 'heapTotalMb'),
        nodeArgs: opts.nodeArgs ?? [],
        growthFirstToLast: growthFirst,
        growthAfterFullToLast: growthAfterFull,
        flat,
        samples,
      }
      lines.push(
        `flood ${floodSec} s, MAX_KEYS=${maxKeys}: ${r.completed.toLocaleString('en-US')} new identifiers (${Math.round(r.rps).toLocaleString('en-US')}/s), ` +
          `stored keys at end ${storedEnd?.toLocaleString('en-US')}, evictions ${evictions?.toLocaleString('en-US')}; ` +
          `RSS first 10 s ${mean(first).toFixed(0)} MB, 10 s after the table filled (t=${fullAt ?? '–'} s) ${mean(afterFull).toFixed(0)} MB, ` +
          `last 10 s ${mean(last).toFixed(0)} MB, peak ${out.flood.rssPeakMb.toFixed(0)} MB → ${flat ? 'flat' : 'GROWING'} ` +
          `(V8 heap used ${mean(afterFull, 'heapUsedMb').toFixed(0)} → ${mean(last, 'heapUsedMb').toFixed(0)} MB, reserved ${mean(afterFull, 'heapTotalMb').toFixed(0)} → ${mean(last, 'heapTotalMb').toFixed(0)} MB) ` +
          `(${(growthAfterFull * 100).toFixed(1)}% after fill, ${(growthFirst * 100).toFixed(1)}% first→last)`,
      )
      log(`memory: ${lines.at(-1)}`)
    } finally {
      await server.stop()
    }
  }
  if (!opts.conditions) lines.push(...conditions.lines())
  out.conditions = conditions.json()
  return out
}

/**
 * Scenario 3: bytes per key of a 3-node cluster with REPLICAS=2, for each build in `builds`
 * ([{ label, main }]). Returns { rows, lines }.
 */
export async function runClusterMemory(opts) {
  const L = await loadLibs()
  const log = opts.log ?? ((m) => process.stderr.write(m + '\n'))
  const keys = opts.keys ?? 300000
  const apiKey = opts.apiKey ?? L.makeApiKey()
  const headers = { authorization: `Bearer ${apiKey}` }
  const conditions = new L.RunConditions()
  const rows = []
  const lines = []
  for (const { label, main } of opts.builds) {
    log(`memory: 3 nodes, REPLICAS=2, ${keys.toLocaleString('en-US')} distinct keys of limit 10 (${label})`)
    const server = await L.startRinglimit({ apiKey, nodes: 3, main, extraEnv: { REPLICAS: '2', ...opts.env }, nodeArgs: opts.nodeArgs ?? [] })
    try {
      // Warm up on a few keys (JIT, buffers, peer links), then settle.
      await L.runLoad({
        loader: 'autocannon',
        urls: server.urls,
        connections: 48,
        durationSec: 3,
        headers,
        bodySpec: { namespace: 'mem', limit: 1000000, duration: 3600, idSpace: 1000, idPrefix: 'warm-' },
        tmpDir: opts.tmpDir,
      })
      const rss0 = await L.settledRss(server.pgids)
      const parts0 = await memoryParts(L, server.urls, server.pgids)
      const watch = new L.GroupWatch(server.pgids)
      watch.refresh()
      const ticks0 = watch.cpuTicks()
      const t0 = performance.now()
      const r = await L.runLoad({
        loader: 'autocannon',
        urls: server.urls,
        connections: 48,
        amount: keys,
        headers,
        timeoutSec: 30,
        // limit 10: below any share's threshold, so owners decide. A year: a token bucket's state goes
        // when it is full again, duration ÷ limit after the key's one request (36.5 days). Of an hour
        // it went after 6 minutes: a fill at load 25 outlasted that and left 10 states of 300,000.
        bodySpec: { namespace: 'mem', limit: 10, duration: 31_536_000, idSpace: keys, idPrefix: 'k-' },
        tmpDir: opts.tmpDir,
      })
      conditions.add(`memory: cluster fill (${label})`, (watch.cpuTicks() - ticks0) / L.clockTicks(), (performance.now() - t0) / 1000, 3)
      const rss1 = await L.settledRss(server.pgids)
      const parts1 = await memoryParts(L, server.urls, server.pgids)
      let owned = 0
      let copies = 0
      let expired = 0
      let evicted = 0
      for (const url of server.urls) {
        const m = await scrape(L, url)
        owned += m.ringlimit_stored_keys ?? 0
        copies += m.ringlimit_replica_states ?? 0
        expired += m.ringlimit_expirations_total ?? 0
        evicted += m.ringlimit_evictions_total ?? 0
      }
      const row = {
        label,
        keys,
        requests: r.completed,
        status: r.status,
        owned,
        copies,
        expired,
        evicted,
        rssBeforeMb: rss0 / 2 ** 20,
        rssAfterMb: rss1 / 2 ** 20,
        bytesPerKey: (rss1 - rss0) / keys,
        bytesPerStateHeld: (rss1 - rss0) / Math.max(1, owned + copies),
        // per key (both copies): V8 heap used and committed (young generation apart), buffers outside it, the tables' estimate, RSS
        partsPerKey: partsPerKey(parts0, parts1, keys),
      }
      rows.push(row)
      lines.push(
        `3 nodes, REPLICAS=2, ${label}: ${row.bytesPerKey.toFixed(0)} B RSS per key (target ≤ 400 B), ${row.bytesPerStateHeld.toFixed(0)} B per state held ` +
          `(RSS of the 3 nodes ${row.rssBeforeMb.toFixed(0)} → ${row.rssAfterMb.toFixed(0)} MiB, settled; ${owned.toLocaleString('en-US')} owned states + ` +
          `${copies.toLocaleString('en-US')} copies for ${keys.toLocaleString('en-US')} keys; statuses ${JSON.stringify(r.status)})`,
        `  per key, where: ${Object.entries(row.partsPerKey)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')} B (heap = V8 heap, newSpace its young generation, external = buffers outside it, tables = ringlimit_stored_bytes)`,
      )
      // every key owned once and copied once (plus the warm-up's): fewer means the figure is not of `keys` states
      if (owned < keys || copies < keys) {
        lines.push(
          `warning: ${label}: ${owned} owned states and ${copies} copies for ${keys} keys (expired ${expired}, evicted ${evicted}): not a figure per key`,
        )
      }
      log(`memory: ${lines.at(-1)}`)
    } finally {
      await server.stop()
    }
  }
  lines.push(...conditions.lines())
  return { rows, lines }
}

// Standalone.
if (import.meta.url === `file://${process.argv[1]}`) {
  const { values: args } = benchOptions(import.meta.url, {
    about: `Memory of one node: bytes per stored key (RSS growth over N distinct identifiers, MAX_KEYS
2,000,000), and a flood of never-repeating identifiers against MAX_KEYS 100,000 (does RSS stay
flat once the table is full?). Writes bench/results/memory.json. Needs the build (npm run build).`,
    options: {
      quick: { type: 'boolean', help: '200,000 keys and a 20 s flood' },
      cluster: { type: 'boolean', help: 'only bytes per key of a 3-node cluster with REPLICAS=2 (default 300,000 keys)' },
      env: {
        type: 'string',
        arg: 'K=V,...',
        defaultText: 'none',
        help: 'with --cluster: environment variables for the nodes, comma-separated (e.g. MALLOC_ARENA_MAX=2)',
      },
      build: { type: 'string', arg: 'DIR', defaultText: 'none', help: "with --cluster: also another checkout's build (DIR/dist/src/main.js), same run" },
      keys: { type: 'number', min: 1, defaultText: '1000000; 200000 with --quick', help: 'distinct identifiers for bytes per key' },
      flood: { type: 'number', min: 1, arg: 'S', defaultText: '60; 20 with --quick', help: 'seconds of flood' },
      loader: { type: 'string', arg: 'L', choices: ['autocannon', 'wrk'], defaultText: 'wrk when installed, else autocannon', help: 'autocannon or wrk' },
      'node-args': {
        type: 'string',
        arg: 'ARGS',
        defaultText: 'none',
        help: "node's own options for the flood's node, e.g. --node-args=--max-old-space-size=64 (a leak dies at the cap)",
      },
    },
  })
  if (!existsSync(join(benchDir, 'node_modules/autocannon/package.json'))) {
    execFileSync('npm', ['ci', '--prefix', benchDir, '--no-audit', '--no-fund'], { stdio: 'inherit' })
  }
  const { installCleanup } = await import('./lib/children.mjs')
  const { ringlimitAvailable } = await import('./lib/servers.mjs')
  if (!ringlimitAvailable()) {
    process.stderr.write('memory: dist/src/main.js missing: run `npm run build` at the repo root first\n')
    process.exit(1)
  }
  const tmp = mkdtempSync(join(tmpdir(), 'ringlimit-mem-'))
  installCleanup(() => rmSync(tmp, { recursive: true, force: true }))
  if (args.cluster) {
    const { ringlimitMain, buildMain } = await import('./lib/servers.mjs')
    const builds = [{ label: 'this build', main: ringlimitMain }]
    if (args.build !== undefined) builds.push({ label: args.build, main: buildMain(args.build, '--build') })
    const env = Object.fromEntries((args.env?.split(',') ?? []).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))
    const nodeArgs = args['node-args'] ? args['node-args'].split(' ').filter(Boolean) : []
    const res = await runClusterMemory({ keys: args.keys, builds, tmpDir: tmp, env, nodeArgs })
    process.stdout.write(res.lines.join('\n') + '\n')
    rmSync(tmp, { recursive: true, force: true })
    process.exit(0)
  }
  const res = await runMemory({
    quick: args.quick,
    keys: args.keys,
    floodSec: args.flood,
    loader: args.loader,
    nodeArgs: args['node-args'] ? args['node-args'].split(' ').filter(Boolean) : undefined,
    tmpDir: tmp,
  })
  process.stdout.write(res.lines.join('\n') + '\n')
  mkdirSync(join(benchDir, 'results'), { recursive: true })
  writeFileSync(join(benchDir, 'results/memory.json'), JSON.stringify({ date: new Date().toISOString(), node: process.version, ...res }, null, 2) + '\n')
  process.stdout.write('results: bench/results/memory.json\n')
  rmSync(tmp, { recursive: true, force: true })
  process.exit(0)
}

#!/usr/bin/env node
// ringlimit benchmark runner: starts every server itself, drives it with autocannon
// (and wrk when installed), reads the servers' CPU time from /proc, prints a table
// with ratios and writes bench/results/latest.json.
//
//   node bench/run.mjs [--quick] [--runs N] [--only a,b] [--loader autocannon|wrk|both]
//                      [--duration S] [--warmup S] [--connections N] [--memory] [--list]
//                      [--gubernator PATH]
//
// See bench/README.md for what each row is and how to read CPU per request.
import { existsSync, mkdirSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { tmpdir, cpus, totalmem, release, platform, arch } from 'node:os'
import { benchOptions } from './lib/options.mjs'
import { sumMetrics } from './lib/metrics-text.mjs'

// First, before anything is installed or started: --help and a bad option answer at once.
const { values: args } = benchOptions(import.meta.url, {
  about: `The benchmark runner: starts every server itself, drives it with autocannon (and wrk when
installed), reads the servers' CPU time from /proc, prints a table of ratios within the run and
writes bench/results/latest.json. See bench/README.md for the rows and how to read them.`,
  options: {
    quick: { type: 'boolean', help: 'short subset, 1 run, autocannon only (under 2 minutes)' },
    runs: { type: 'number', min: 1, defaultText: '3; 1 with --quick', help: 'runs per scenario, the median is reported' },
    only: { type: 'string', arg: 'a,b', defaultText: 'every row', help: 'scenarios by name (a trailing * matches a prefix: ringlimit-*)' },
    loader: {
      type: 'string',
      arg: 'L',
      choices: ['autocannon', 'wrk', 'both'],
      defaultText: 'both when wrk is installed; autocannon with --quick',
      help: 'autocannon | wrk | both',
    },
    duration: { type: 'number', min: 1, arg: 'S', defaultText: '8; 4 with --quick', help: 'measured seconds per run and loader' },
    warmup: { type: 'number', min: 0, arg: 'S', defaultText: '3; 2 with --quick', help: 'warm-up seconds per server start' },
    connections: { type: 'number', min: 1, default: 50, help: "connections in total, spread over a row's nodes" },
    memory: { type: 'boolean', help: 'also run the memory scenarios (bench/memory.mjs)' },
    markdown: { type: 'boolean', help: 'also print the tables as Markdown' },
    baseline: {
      type: 'string',
      arg: 'DIR',
      defaultText: 'none',
      help: 'also run every selected ringlimit row on the build of another checkout (DIR/dist/src/main.js, rows named <row>@base)',
    },
    gubernator: {
      type: 'string',
      arg: 'PATH',
      defaultText: 'none: the gubernator-* rows are skipped',
      help: 'a gubernator v2 binary built by hand (bench/README.md); its rows run 1 and 3 daemons (needs root for unshare --uts)',
    },
    list: { type: 'boolean', help: 'list the scenarios and exit' },
  },
})

const benchDir = new URL('.', import.meta.url).pathname
const repoRoot = join(benchDir, '..')

// Bench dependencies live in bench/node_modules; a fresh clone installs them here.
if (!existsSync(join(benchDir, 'node_modules/autocannon/package.json'))) {
  process.stderr.write('bench: installing bench dependencies (npm ci --prefix bench)\n')
  execFileSync('npm', ['ci', '--prefix', benchDir, '--no-audit', '--no-fund'], { stdio: 'inherit' })
}

const { installCleanup, liveCount } = await import('./lib/children.mjs')
const { RunConditions } = await import('./lib/conditions.mjs')
const { GroupWatch, clockTicks } = await import('./lib/procfs.mjs')
const { runLoad, wrkVersion } = await import('./lib/load.mjs')
const { get, postJson } = await import('./lib/net.mjs')
const srv = await import('./lib/servers.mjs')
const { SCENARIOS, BASELINE, LOCAL } = await import('./lib/scenarios.mjs')
const { summarise, table, markdown, clusterRatios } = await import('./lib/report.mjs')
const { bodyParts } = await import('./lib/bodies.mjs')

if (args.list) {
  for (const s of SCENARIOS) process.stdout.write(`${s.name.padEnd(26)}${s.quick ? 'quick ' : '      '}${s.desc}\n`)
  process.exit(0)
}

const quick = args.quick
const haveWrk = wrkVersion()
const redisVersion = srv.redisAvailable()
const runs = args.runs ?? (quick ? 1 : 3)
const durationSec = args.duration ?? (quick ? 4 : 8)
const warmupSec = args.warmup ?? (quick ? 2 : 3)
const connections = args.connections
const notes = []

const wanted = args.loader ?? (quick || !haveWrk ? 'autocannon' : 'both')
let loaders = wanted === 'both' ? ['autocannon', 'wrk'] : [wanted]
if (loaders.includes('wrk') && !haveWrk) {
  notes.push('wrk is not installed (apt-get install wrk): wrk rows skipped')
  loaders = loaders.filter((l) => l !== 'wrk')
  if (loaders.length === 0) loaders = ['autocannon']
}

let selected = SCENARIOS.filter((s) => !quick || s.quick)
if (args.only) {
  const pats = args.only
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  const match = (name) => pats.some((p) => (p.endsWith('*') ? name.startsWith(p.slice(0, -1)) : name === p))
  const unknown = pats.filter((p) => !SCENARIOS.some((s) => (p.endsWith('*') ? s.name.startsWith(p.slice(0, -1)) : s.name === p)))
  if (unknown.length) {
    process.stderr.write(`bench: unknown scenario(s): ${unknown.join(', ')} (see --list)\n`)
    process.exit(2)
  }
  selected = SCENARIOS.filter((s) => match(s.name))
}

// Before/after in one run: each ringlimit row gets a twin started from another build
// (for example a worktree of the previous commit, built there).
if (args.baseline) {
  const main = srv.buildMain(args.baseline)
  selected = selected.flatMap((s) =>
    s.server.kind === 'ringlimit'
      ? [
          s,
          {
            ...s,
            name: `${s.name}@base`,
            desc: `${s.desc} [${args.baseline}]`,
            server: { ...s.server, main },
            // the twin's cluster is divided by the twin's one node: a before/after of the ratio
            ...(s.oneNode ? { oneNode: `${s.oneNode}@base` } : {}),
          },
        ]
      : [s],
  )
}

const tmp = mkdtempSync(join(tmpdir(), 'ringlimit-bench-'))
installCleanup(() => {
  rmSync(tmp, { recursive: true, force: true })
  tlsFiles?.remove()
})
const apiKey = srv.makeApiKey()
const authHeaders = { authorization: `Bearer ${apiKey}` }
let tlsFiles = null
const needsTls = selected.some((s) => s.server.tls)
if (needsTls) {
  try {
    tlsFiles = await srv.makeCert()
  } catch (e) {
    notes.push(`no self-signed certificate (${e.message}): HTTPS rows skipped`)
  }
}

// Rows that cannot run here are skipped with a reason, never silently dropped.
const skipped = new Map()
const ringlimitBuilt = srv.ringlimitAvailable()
for (const s of selected) {
  if (s.server.kind === 'ringlimit' && !ringlimitBuilt) skipped.set(s.name, 'dist/src/main.js missing (run `npm run build` at the repo root)')
  else if (s.server.kind === 'fastify' && s.server.store === 'redis' && !redisVersion)
    skipped.set(s.name, 'redis-server not on PATH (apt-get install redis-server)')
  else if (s.server.tls && !tlsFiles) skipped.set(s.name, 'no TLS certificate (see the notes)')
  else if (s.server.kind === 'gubernator' && !args.gubernator) skipped.set(s.name, 'no --gubernator PATH (bench/README.md: building gubernator by hand)')
  else if (s.server.kind === 'gubernator' && !existsSync(args.gubernator)) skipped.set(s.name, `--gubernator ${args.gubernator}: no such file`)
}

function log(msg) {
  process.stderr.write(msg + '\n')
}
function gitInfo() {
  try {
    const commit = execFileSync('git', ['-C', repoRoot, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()
    const dirty = execFileSync('git', ['-C', repoRoot, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() !== ''
    return { commit, dirty }
  } catch {
    return null
  }
}

/**
 * The policy of the policy rows: 10,000 overrides, 9,000 exact identifiers and 999 wildcard
 * ones in namespace `bench` (the rows' identifiers match none of them) and `vip` alone (every
 * identifier of the hit row matches it, with the limit the bodies send).
 */
let policyPath
function policyFile() {
  if (policyPath !== undefined) return policyPath
  const lines = ['overrides:']
  for (let i = 0; i < 9000; i++) lines.push(`  - {namespace: bench, identifier: tenant-${i}, limit: ${100 + (i % 900)}}`)
  for (let i = 0; i < 999; i++) lines.push(`  - {namespace: bench, identifier: "group-${i}-*", limit: 50}`)
  lines.push('  - {namespace: vip, limit: 1000000}')
  const dir = mkdtempSync(join(tmpdir(), 'ringlimit-bench-policy-'))
  policyPath = join(dir, 'overrides.yaml')
  writeFileSync(policyPath, lines.join('\n') + '\n')
  return policyPath
}

async function startServer(s) {
  const k = s.server
  const tls = k.tls ? tlsFiles : undefined
  if (k.kind === 'floor') return srv.startFloor({ tls })
  if (k.kind === 'fastify') return srv.startFastify({ store: k.store, apiKey })
  if (k.kind === 'gubernator') return srv.startGubernator({ bin: args.gubernator, nodes: k.nodes ?? 1 })
  if (k.kind === 'ringlimit')
    return srv.startRinglimit({
      apiKey,
      nodes: k.nodes ?? 1,
      tls,
      ...(k.main ? { main: k.main } : {}),
      extraEnv: { ...(k.env ?? {}), ...(k.policy ? { POLICY_PATH: policyFile() } : {}) },
    })
  throw new Error(`unknown server kind ${k.kind}`)
}

// ringlimit's own counters, summed over labels and nodes, read before and after each
// measurement: fail-open answers (ringlimit_degraded_total), decisions forwarded to
// another node (ringlimit_forwarded_total but its outcome "shared"), stored keys and evictions.
const METRICS = ['ringlimit_degraded_total', 'ringlimit_forwarded_total', 'ringlimit_stored_keys', 'ringlimit_evictions_total']
async function scrapeMetrics(server) {
  const sums = {}
  for (const u of server.urls) {
    let text
    try {
      const r = await get(u + '/metrics', 3000)
      if (r.status !== 200) continue
      text = r.body
    } catch {
      continue
    }
    sumMetrics(text, METRICS, sums)
  }
  return sums
}
const delta = (a, b, k) => (a && b && b[k] != null ? b[k] - (a[k] ?? 0) : null)

let seq = 0
function idPrefix(s, tag) {
  return `${tag}${(++seq).toString(36)}-`
}

async function measure(s, server, loader, run, prefix) {
  const watch = new GroupWatch(server.pgids)
  const before = s.server.kind === 'ringlimit' ? await scrapeMetrics(server) : null
  watch.refresh()
  let cpu0 = 0
  const t0 = performance.now()
  const res = await runLoad(
    {
      loader,
      urls: server.urls,
      connections,
      durationSec,
      headers: authHeaders,
      bodySpec: { ...s.body, idPrefix: prefix ?? idPrefix(s, `r${run}`) },
      tmpDir: tmp,
    },
    () => {
      cpu0 = watch.cpuTicks()
    },
  )
  const cpu1 = watch.cpuTicks()
  const wall = (performance.now() - t0) / 1000
  const after = s.server.kind === 'ringlimit' ? await scrapeMetrics(server) : null
  const cpuSec = (cpu1 - cpu0) / clockTicks()
  conditions.add(`${s.name} (${loader})`, cpuSec, res.wallSec, server.urls.length)
  const n200 = res.status['200'] ?? 0
  const n429 = res.status['429'] ?? 0
  return {
    ...res,
    run,
    cpuSec,
    cpuUsPerReq: res.completed ? (cpuSec * 1e6) / res.completed : null,
    serverCores: cpuSec / res.wallSec,
    otherStatus: res.completed - n200 - n429,
    degraded: delta(before, after, 'ringlimit_degraded_total'),
    forwarded: delta(before, after, 'ringlimit_forwarded_total'),
    forwardedShare:
      delta(before, after, 'ringlimit_forwarded_total') != null && res.completed ? delta(before, after, 'ringlimit_forwarded_total') / res.completed : null,
    metrics: after ?? undefined,
    loaderWallSec: wall,
  }
}

const results = new Map(selected.map((s) => [s.name, { scenario: s, runs: Object.fromEntries(loaders.map((l) => [l, []])), probe: null, failures: [] }]))
const active = selected.filter((s) => !skipped.has(s.name))
const totalSteps = active.length * runs
const started = Date.now()
const conditions = new RunConditions()
log(
  `bench: ${active.length} scenario(s) × ${runs} run(s), loaders ${loaders.join('+')}, ${connections} connections, ` +
    `${warmupSec}s warm-up + ${durationSec}s per loader; ${cpus().length} cpus, node ${process.version}`,
)
for (const [name, why] of skipped) log(`bench: skip ${name}: ${why}`)

let step = 0
// Runs are interleaved (every scenario once, then again) so that drift in the
// machine's background load spreads over all rows instead of biasing one.
for (let run = 1; run <= runs; run++) {
  for (const s of active) {
    if (skipped.has(s.name)) continue
    step++
    const tag = `[${String(step).padStart(String(totalSteps).length)}/${totalSteps}] ${s.name} run ${run}/${runs}`
    const entry = results.get(s.name)
    let server
    try {
      log(`${tag}: starting`)
      server = await startServer(s)
      const watch = new GroupWatch(server.pgids)
      // One real request first: a row whose server rejects our requests is reported, not measured.
      const probeBody = {
        namespace: s.body.namespace,
        identifier: `probe-${run}`,
        limit: s.body.limit,
        duration: s.body.duration,
        ...(s.body.algorithm ? { algorithm: s.body.algorithm } : {}),
        ...(s.body.cost !== undefined ? { cost: s.body.cost } : {}),
      }
      const gubernator = s.body.format === 'gubernator'
      const probe = await postJson(server.urls[0] + (s.body.path ?? '/limit'), gubernator ? bodyParts(s.body).join(`probe-${run}`) : probeBody, authHeaders)
      if (run === 1) entry.probe = { status: probe.status, headers: probe.headers, body: probe.body.slice(0, 800) }
      if (probe.status !== 200) throw new Error(`probe request answered ${probe.status}: ${probe.body.slice(0, 200)}`)
      // gubernator answers 200 whatever happened: the decision and any error are in the body.
      if (gubernator && !/"status":"UNDER_LIMIT"/.test(probe.body)) throw new Error(`probe request not allowed: ${probe.body.slice(0, 200)}`)
      // A row marked `steady` measures the identifiers its warm-up sent (a Service serving the
      // same users minute after minute); the others measure identifiers never sent before.
      const steadyPrefix = s.steady ? idPrefix(s, `s${run}`) : undefined
      if (warmupSec > 0) {
        await runLoad({
          loader: loaders[0],
          urls: server.urls,
          connections,
          durationSec: warmupSec,
          headers: authHeaders,
          bodySpec: { ...s.body, idPrefix: steadyPrefix ?? idPrefix(s, `w${run}`) },
          tmpDir: tmp,
        })
      }
      for (const loader of loaders) {
        const r = await measure(s, server, loader, run, steadyPrefix)
        entry.runs[loader].push(r)
        const bad = r.errors + r.otherStatus + (r.degraded ?? 0)
        log(
          `${tag} ${loader.padEnd(10)} ${Math.round(r.rps).toLocaleString('en-US').padStart(7)} req/s  ` +
            `CPU ${r.cpuUsPerReq?.toFixed(1).padStart(6)} µs/req  p99 ${(r.latencyUs.p99 / 1000).toFixed(2)} ms` +
            (r.forwardedShare ? `  forwarded ${(r.forwardedShare * 100).toFixed(0)}%` : '') +
            (bad ? `  (errors ${r.errors}, other statuses ${r.otherStatus}, degraded ${r.degraded ?? 0})` : ''),
        )
      }
      watch.refresh()
      entry.hwmMb = Math.max(entry.hwmMb ?? 0, watch.hwmKb() / 1024)
      for (const l of loaders) {
        const last = entry.runs[l].at(-1)
        if (last && last.run === run) last.peakRssMb = watch.hwmKb() / 1024
      }
    } catch (e) {
      log(`${tag}: FAILED ${e.message}`)
      entry.failures.push({ run, error: e.message })
      // A server that cannot start will not start on the next run either.
      if (!server) skipped.set(s.name, `failed: ${e.message}`)
    } finally {
      if (server) await server.stop()
    }
  }
}

// Summaries, one table per loader, ratios within the same loader and run set.
const tables = {}
const summary = {}
for (const loader of loaders) {
  const rows = []
  for (const s of selected) {
    const e = results.get(s.name)
    if (e.runs[loader].length === 0) continue
    rows.push({ name: s.name, scenario: s, s: summarise(e.runs[loader]) })
  }
  const base = rows.find((r) => r.name === BASELINE)?.s.cpuUsPerReq
  const local = rows.find((r) => r.name === LOCAL)?.s.cpuUsPerReq
  for (const r of rows) {
    r.vsFloor = base ? r.s.cpuUsPerReq / base : null
    r.vsLocal = local ? r.s.cpuUsPerReq / local : null
    const own = r.scenario.oneNode && rows.find((o) => o.name === r.scenario.oneNode)?.s.cpuUsPerReq
    r.vsOneNode = own ? r.s.cpuUsPerReq / own : null
  }
  tables[loader] = rows
  // A row priced as decisions that allow must have answered nothing else: a 429, an error or a
  // fail-open 200 (degraded) costs less than a decision, and its ratio would flatter the row.
  for (const r of rows) {
    if (!r.scenario.all200) continue
    // autocannon counts HTTP statuses, and gubernator's decision is in a 200's body.
    if (loader !== 'wrk' && r.scenario.body.format === 'gubernator') {
      r.checked = 'not checked (only wrk reads the body)'
      continue
    }
    const blocked = Math.round((r.s.blockedShare ?? 0) * r.s.completed)
    const bad = { 429: blocked, 'other statuses': r.s.otherStatus, errors: r.s.errors, degraded: r.s.degraded ?? 0 }
    const seen = Object.entries(bad).filter(([, n]) => n > 0)
    if (seen.length)
      notes.push(
        `${r.name} (${loader}): not all answers were undegraded 200s (${seen.map(([k, n]) => `${k} ${n}`).join(', ')}): its CPU per decision is not a decision's price`,
      )
    else r.checked = `all ${r.s.completed.toLocaleString('en-US')} allowed${r.s.degraded != null ? ', none degraded' : ', no error'}`
  }
  summary[loader] = Object.fromEntries(rows.map((r) => [r.name, { ...r.s, cpuVsFloor: r.vsFloor, cpuVsLocal: r.vsLocal, cpuVsOneNode: r.vsOneNode }]))
}

let memory = null
if (args.memory) {
  if (!ringlimitBuilt) notes.push('memory scenarios skipped: dist/src/main.js missing')
  else {
    const { runMemory } = await import('./memory.mjs')
    memory = await runMemory({ quick, apiKey, tmpDir: tmp, log, conditions })
  }
}

const out = process.stdout
out.write(`\nringlimit bench — ${new Date().toISOString()} — ${cpus().length} × ${cpus()[0]?.model ?? '?'}, node ${process.version}\n`)
out.write(`${connections} connections, ${durationSec}s measured per run, median of ${runs} run(s)\n${conditions.lines().join('\n')}\n`)
out.write(
  "CPU µs/req = server processes' utime+stime (/proc) ÷ responses; ×floor and ×rl-local divide it by the floor's and by ringlimit-allowed's, same loader;\n" +
    "×1-node divides a cluster's by that of the same keys on one node of the same server.\n",
)
for (const loader of loaders) {
  if (!tables[loader].length) continue
  out.write(`\n${loader}\n${table(tables[loader])}\n`)
  if (args.markdown) out.write(`\n${markdown(tables[loader])}\n`)
  for (const line of clusterRatios(tables[loader])) out.write(line + '\n')
  const checked = tables[loader].filter((r) => r.checked)
  if (checked.length) out.write(`checked: ${checked.map((r) => `${r.name} ${r.checked}`).join('; ')}\n`)
  // A charge with an id against one without, same run, same key, same body size (issue 29 item 6).
  const [withId, noId] = ['ringlimit-charge-id', 'ringlimit-charge-noid'].map((n) => tables[loader].find((r) => r.name === n)?.s.cpuUsPerReq)
  if (withId && noId) out.write(`a charge with a charge_id / one without, CPU µs per request: ${(withId / noId).toFixed(2)}×\n`)
}
if (memory) {
  out.write('\nmemory\n')
  for (const line of memory.lines) out.write(line + '\n')
}
const failures = [...results.values()].filter((e) => e.failures.length)
for (const e of failures) for (const f of e.failures) notes.push(`${e.scenario.name} run ${f.run}: ${f.error}`)
for (const [name, why] of skipped) if (!failures.some((e) => e.scenario.name === name)) notes.push(`${name} skipped: ${why}`)
if (notes.length) out.write('\nnotes:\n' + notes.map((n) => `- ${n}`).join('\n') + '\n')
out.write(`\ntook ${((Date.now() - started) / 1000).toFixed(0)} s\n`)

const json = {
  date: new Date().toISOString(),
  machine: {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    totalMemMb: Math.round(totalmem() / 2 ** 20),
    node: process.version,
    platform: `${platform()} ${release()} ${arch()}`,
    clkTck: clockTicks(),
    loadavgStart: conditions.before,
    loadavgEnd: conditions.json().loadavgAfter,
    wrk: haveWrk,
    redis: redisVersion,
  },
  git: gitInfo(),
  options: { quick, runs, durationSec, warmupSec, connections, loaders, only: args.only ?? null },
  notes,
  conditions: conditions.json(),
  summary,
  scenarios: [...results.values()].map((e) => ({
    name: e.scenario.name,
    desc: e.scenario.desc,
    server: e.scenario.server,
    body: e.scenario.body,
    skipped: skipped.get(e.scenario.name) ?? null,
    failures: e.failures,
    probe: e.probe,
    runs: e.runs,
  })),
  memory,
}
mkdirSync(join(benchDir, 'results'), { recursive: true })
writeFileSync(join(benchDir, 'results/latest.json'), JSON.stringify(json, null, 2) + '\n')
out.write(`results: bench/results/latest.json\n`)
rmSync(tmp, { recursive: true, force: true })
tlsFiles?.remove()
if (liveCount() !== 0) log(`bench: warning: ${liveCount()} child group(s) still tracked at exit (killed now)`)
process.exit(0)

#!/usr/bin/env node
// Issue 40: where a WORKERS node's CPU goes, thread by thread. Starts one node per WORKERS
// value given, drives POST /limit with wrk for a few seconds, and reads each thread's
// utime+stime from /proc/<pid>/task/<tid>/stat: the main thread is the state owner, whose
// µs per decision sets the node's ceiling (1e6 / that, in decisions per second).
//
//   node bench/workers-threads.mjs [--workers 1,2] [--seconds 4] [--connections 50] [--rate R] [--baseline DIR]
//
// --rate R: a steady R requests/s from lib/paced-driver.mjs instead of wrk at saturation (the
// hop's cost at low load: p50/p99 against WORKERS=1 in the same run). --baseline DIR: every
// row again on another checkout's build (rows named @base), interleaved, for a before/after.
import { execFileSync, spawn } from 'node:child_process'
import { readFileSync, readdirSync, writeFileSync, mkdtempSync } from 'node:fs'
import { tmpdir, cpus, loadavg } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { benchOptions } from './lib/options.mjs'
import { ringlimitMain, makeApiKey, buildMain } from './lib/servers.mjs'
import { freePort } from './lib/net.mjs'

const { values } = benchOptions(import.meta.url, {
  about: `Where a WORKERS node's CPU goes, thread by thread: one node per WORKERS value, POST /limit
driven by wrk, each thread's CPU from /proc/<pid>/task; the main thread is the state owner, whose
µs per decision sets the node's ceiling. Needs the build (npm run build) and wrk.`,
  options: {
    workers: { type: 'string', arg: 'LIST', default: '1,2', help: 'WORKERS values to run, comma-separated' },
    seconds: { type: 'number', min: 1, default: 4, help: 'measured seconds per node' },
    connections: { type: 'number', min: 1, default: 50, help: 'wrk connections (1 for a light load)' },
    rate: { type: 'number', min: 0, default: 0, help: 'a steady rate in requests/s (lib/paced-driver.mjs) instead of wrk; 0: wrk at saturation' },
    baseline: { type: 'string', arg: 'DIR', defaultText: 'none', help: "also run every row on DIR's build (DIR/dist/src/main.js), rows named @base" },
  },
})
const TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim())

function threads(pid) {
  const out = new Map()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
      out.set(tid, { name, us: (Number(rest[11]) + Number(rest[12])) * TICK_US })
    } catch {}
  }
  return out
}

async function ready(url) {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(url + '/ready')).status === 200) return
    } catch {}
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error('node not ready')
}

const here = dirname(fileURLToPath(import.meta.url))
const builds = [['', ringlimitMain], ...(values.baseline ? [['@base', buildMain(values.baseline)]] : [])]

/** `seconds` at a steady `rate` from the paced driver, after a second's warm-up: { total, p50, p99 } (µs). */
function paced(url, key, seconds, onStarted) {
  return new Promise((resolve, reject) => {
    const spec = {
      urls: [url + '/limit'],
      rate: values.rate,
      seconds,
      warmup: 1,
      connections: Math.max(values.connections, 4),
      headers: { Authorization: `Bearer ${key}` },
      head: '{"namespace":"bench","identifier":"',
      tail: '","limit":1000000,"duration":60}',
      idPrefix: 'u',
      idSpace: 10000,
    }
    const driver = spawn(process.execPath, [join(here, 'lib/paced-driver.mjs'), JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    driver.stdout.on('data', (d) => {
      if (!out.includes('STARTED') && (out + d).includes('STARTED')) onStarted()
      out += d
    })
    driver.on('exit', () => {
      const line = out.split('\n').find((l) => l.startsWith('BENCHJSON '))
      if (line === undefined) return reject(new Error('paced driver gave no result'))
      const r = JSON.parse(line.slice('BENCHJSON '.length))
      resolve({ total: r.completed, p50: `${(r.latencyUs.p50 / 1000).toFixed(2)}ms`, p99: `${(r.latencyUs.p99 / 1000).toFixed(2)}ms` })
    })
  })
}

const dir = mkdtempSync(join(tmpdir(), 'rl-workers-'))
const script = join(dir, 'limit.lua')
console.log(
  `load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')} on ${cpus().length} cpus; ${values.rate ? `${values.rate} requests/s` : `${values.connections} connections`}, ${values.seconds}s each`,
)
for (const w of values.workers.split(','))
  for (const [suffix, mainJs] of builds) {
    const key = makeApiKey()
    const port = await freePort()
    writeFileSync(
      script,
      `wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.headers["Authorization"] = "Bearer ${key}"\ncounter = 0\nrequest = function()\n  counter = counter + 1\n  return wrk.format(nil, "/limit", nil, '{"namespace":"bench","identifier":"u' .. (counter % 10000) .. '","limit":1000000,"duration":60}')\nend\n`,
    )
    const child = spawn(process.execPath, [mainJs], {
      env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port), PEER_PORT: String(await freePort()), API_KEYS: key, LOG_LEVEL: 'warn', WORKERS: w },
      stdio: 'ignore',
    })
    const url = `http://127.0.0.1:${port}`
    await ready(url)
    let before
    let total
    let p50
    let p99
    if (values.rate) {
      ;({ total, p50, p99 } = await paced(url, key, values.seconds, () => (before = threads(child.pid))))
    } else {
      execFileSync('wrk', ['-t1', '-c', String(values.connections), '-d', '2', '-s', script, url], { encoding: 'utf8' })
      before = threads(child.pid)
      const out = execFileSync('wrk', ['-t1', '-c', String(values.connections), '-d', String(values.seconds), '--latency', '-s', script, url], {
        encoding: 'utf8',
      })
      total = Number(/(\d+) requests in/.exec(out)[1])
      p50 = /50%\s+(\S+)/.exec(out)[1]
      p99 = /99%\s+(\S+)/.exec(out)[1]
    }
    const after = threads(child.pid)
    let all = 0
    const rows = []
    for (const [tid, a] of after) {
      const us = a.us - (before.get(tid)?.us ?? 0)
      all += us
      if (us / total >= 0.05) rows.push(`${tid === String(child.pid) ? 'main (state owner)' : a.name}: ${(us / total).toFixed(2)} µs/req`)
    }
    console.log(
      `WORKERS=${w}${suffix}: ${Math.round(total / Number(values.seconds))} req/s, p50 ${p50}, p99 ${p99}, process ${(all / total).toFixed(1)} µs/req; ${rows.join('; ')}`,
    )
    const main = (after.get(String(child.pid)).us - before.get(String(child.pid)).us) / total
    if (w !== '1') console.log(`  state owner ceiling: ~${Math.round(1e6 / main).toLocaleString('en')} decisions/s (1e6 / ${main.toFixed(2)} µs)`)
    child.kill('SIGTERM')
    await new Promise((r) => child.on('exit', r))
  }

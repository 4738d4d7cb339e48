#!/usr/bin/env node
// What a reset costs the owner once an identifier has many states, and whether a storm of
// resets stalls it (issue 22 item 2). One real node, standalone, loopback:
//
//   node bench/reset.mjs [--states N] [--resets N] [--storm N] [--baseline DIR]
//
// 1. `states` requests on one identifier, each with its own duration (1..N s): as many
//    states, and as many distinct durations in the table.
// 2. Cost: `resets` rounds of one decision then one reset of another identifier (one state
//    each), sequential on one keep-alive connection: the owner's CPU (/proc) per round and
//    the answer times, against `resets` decisions alone.
// 3. Storm: the identifier's states made again, then `storm` resets of it pipelined at once
//    on as many connections, 5 rounds, while GET /health is asked every 5 ms on its own
//    connection: its slowest answer and the storm's wall time.
import http from 'node:http'
import { benchOptions } from './lib/options.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `What POST /limit/reset costs the owner once one identifier has many states (one per
distinct duration), against a decision; and how long GET /health waits while resets are
pipelined at the node. One standalone node of the build (or of --baseline's, for a row each).`,
  options: {
    states: { type: 'number', min: 1, default: 4096, help: 'states (distinct durations) of the reset identifier' },
    resets: { type: 'number', min: 10, default: 300, help: 'sequential resets (and decisions) measured' },
    storm: { type: 'number', min: 1, default: 64, help: 'resets pipelined at once per storm round' },
    baseline: { type: 'string', arg: 'DIR', defaultText: 'none: this build only', help: 'a checkout built with npm run build, measured first' },
  },
})

const { installCleanup } = await import('./lib/children.mjs')
const { RunConditions } = await import('./lib/conditions.mjs')
const { cpuTicks, clockTicks } = await import('./lib/procfs.mjs')
const { buildMain, makeApiKey, ringlimitMain, startRinglimit } = await import('./lib/servers.mjs')
installCleanup()
const conditions = new RunConditions()
const apiKey = makeApiKey()

/** One request on `agent`'s connection; resolves with the status and the ms it took. */
function send(agent, url, path, body) {
  const data = body === undefined ? undefined : JSON.stringify(body)
  const started = performance.now()
  return new Promise((resolve, reject) => {
    const req = http.request(
      url + path,
      {
        method: data === undefined ? 'GET' : 'POST',
        agent,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(data === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) }),
        },
      },
      (res) => {
        res.resume()
        res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - started }))
      },
    )
    req.on('error', reject)
    req.end(data)
  })
}

const limitBody = (identifier, duration) => ({ namespace: 'bench', identifier, limit: 1_000_000, duration })
const resetBody = (identifier) => ({ namespace: 'bench', identifier })
const pct = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]

async function fill(agent, url, identifier) {
  for (let d = 1; d <= args.states; d += 64) {
    const batch = []
    for (let k = d; k < d + 64 && k <= args.states; k++) batch.push(send(agent, url, '/limit', limitBody(identifier, k)))
    await Promise.all(batch)
  }
}

async function measure(label, main) {
  const server = await startRinglimit({ apiKey, main })
  const url = server.urls[0]
  const pid = server.pgids[0]
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 })
  try {
    await fill(agent, url, 'many')
    const one = new http.Agent({ keepAlive: true, maxSockets: 1 })
    // Decisions alone, then decision + reset rounds (the reset removes the state just made).
    const rounds = async (withReset) => {
      const times = []
      const t0 = cpuTicks(pid)
      const w0 = performance.now()
      for (let i = 0; i < args.resets; i++) {
        await send(one, url, '/limit', limitBody(`one-${i % 16}`, 60))
        if (withReset) times.push((await send(one, url, '/limit/reset', resetBody(`one-${i % 16}`))).ms)
      }
      return { cpuMs: ((cpuTicks(pid) - t0) / clockTicks()) * 1000, wallS: (performance.now() - w0) / 1000, times }
    }
    const decisions = await rounds(false)
    const withResets = await rounds(true)
    conditions.add(label, (decisions.cpuMs + withResets.cpuMs) / 1000, decisions.wallS + withResets.wallS, 1)
    const resetCpuMs = (withResets.cpuMs - decisions.cpuMs) / args.resets
    const decisionCpuMs = decisions.cpuMs / args.resets

    // Storm: resets pipelined at once while /health is polled on its own connection.
    const health = new http.Agent({ keepAlive: true, maxSockets: 1 })
    let worstHealthMs = 0
    let polling = true
    const poller = (async () => {
      while (polling) {
        const r = await send(health, url, '/health')
        worstHealthMs = Math.max(worstHealthMs, r.ms)
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
    })()
    const stormMs = []
    for (let round = 0; round < 5; round++) {
      await fill(agent, url, 'many')
      const s = performance.now()
      await Promise.all(Array.from({ length: args.storm }, () => send(agent, url, '/limit/reset', resetBody('many'))))
      stormMs.push(performance.now() - s)
    }
    polling = false
    await poller
    for (const a of [agent, one, health]) a.destroy()
    return {
      build: label,
      states: args.states,
      decisionCpuMs: +decisionCpuMs.toFixed(3),
      resetCpuMs: +resetCpuMs.toFixed(3),
      resetMsP50: +pct(withResets.times, 0.5).toFixed(2),
      resetMsP99: +pct(withResets.times, 0.99).toFixed(2),
      stormWallMs: stormMs.map((x) => Math.round(x)),
      worstHealthMs: Math.round(worstHealthMs),
    }
  } finally {
    await server.stop()
  }
}

const rows = []
if (args.baseline !== undefined) rows.push(await measure('baseline', buildMain(args.baseline)))
rows.push(await measure('this build', ringlimitMain))
for (const row of rows) console.log(JSON.stringify(row))
conditions.print((s) => process.stderr.write(s))

// One load-generating process for bench/client.mjs: `concurrency` loops, each awaiting one
// check after another, through either a bare undici Pool or a RingLimitClient. Prints
// "start" when the measured part begins and one JSON line when it ends, with its own CPU.
//
//   node bench/lib/client-driver.mjs '{"mode":"client","urls":[...],"routing":"owner","seconds":6,"concurrency":64,"key":"svc_sk_…"}'
import { Pool } from 'undici'
import { RingLimitClient } from '../../dist/src/client/index.js'

const o = JSON.parse(process.argv[2])
const IDS = 10_000
const body = (n) => ({ namespace: 'bench', identifier: 'user-' + (n % IDS), limit: 1_000_000, duration: 60 })

let limit
let close
if (o.mode === 'undici') {
  // The bare request a hand-written caller would make: pool.request, status, body read.
  const pool = new Pool(o.urls[0], { connections: 16, pipelining: 1 })
  const headers = { authorization: 'Bearer ' + o.key, 'content-type': 'application/json' }
  limit = async (req) => {
    const r = await pool.request({ path: '/limit', method: 'POST', headers, body: JSON.stringify(req) })
    await r.body.text()
    return r.statusCode === 200
  }
  close = () => pool.close()
} else {
  const client = new RingLimitClient({ urls: o.urls, apiKey: o.key, routing: o.routing, timeoutMs: 1000 })
  await client.ready()
  limit = async (req) => (await client.limit(req)).allowed
  close = async () => {
    console.error(JSON.stringify(client.stats))
    await client.close()
  }
}

let n = Math.floor(Math.random() * IDS)
let calls = 0
let running = true
const loop = async () => {
  while (running) {
    await limit(body(n++))
    calls++
  }
}
const loops = Array.from({ length: o.concurrency }, loop)
await new Promise((r) => setTimeout(r, (o.warmupSeconds ?? 1) * 1000))
const calls0 = calls
const cpu0 = process.cpuUsage()
const t0 = performance.now()
console.log('start')
await new Promise((r) => setTimeout(r, o.seconds * 1000))
const cpu = process.cpuUsage(cpu0)
const elapsed = (performance.now() - t0) / 1000
const measured = calls - calls0
console.log(JSON.stringify({ calls: measured, seconds: elapsed, cpuUs: cpu.user + cpu.system }))
running = false
await Promise.all(loops)
await close()
process.exit(0)

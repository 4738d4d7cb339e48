// A load generator at a steady rate (a child process of the bench). autocannon's `overallRate`
// lets each connection send its whole second's quota at once and then wait for the next
// second, so 1,000 requests/s arrive as one burst a second: the servers batch as under full
// load. Here a 1 ms tick releases what the rate has made due since the start, onto idle
// keep-alive connections (requests whose turn came while every connection was busy wait
// for the next free one, and are timed from their due time).
//
//   node paced-driver.mjs '<json: { urls, rate, seconds, warmup, connections, headers, head, tail, ids | idPrefix + idSpace }>'
// Prints one line: BENCHJSON { completed, status, wallSec, late, latencyUs: { p50, p99, p999, max } }
// after printing "STARTED" when the measured period begins.
import net from 'node:net'
import { Histogram } from './histogram.mjs'

const o = JSON.parse(process.argv[2])
const hist = new Histogram()
const status = {}
const targets = o.urls.map((u) => new URL(u))
const headerText = Object.entries({ 'Content-Type': 'application/json', ...o.headers })
  .map(([k, v]) => `${k}: ${v}\r\n`)
  .join('')

const ids = o.ids ?? Array.from({ length: o.idSpace }, (_, i) => o.idPrefix + i)
function requestFor(target, n) {
  const body = o.head + ids[n % ids.length] + o.tail
  return `POST /limit HTTP/1.1\r\nHost: ${target.host}\r\n${headerText}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}

// Per target: idle connections, and due times of requests waiting for one.
const idle = targets.map(() => [])
const dueAt = targets.map(() => [])
let sent = 0
let completed = 0
let due = 0
let late = 0
let t0 = 0
let measuring = false

function connection(i) {
  const target = targets[i % targets.length]
  const c = { socket: net.connect({ host: target.hostname, port: Number(target.port), noDelay: true }), target, t: i % targets.length, buf: '', at: 0 }
  c.socket.setEncoding('latin1')
  c.socket.on('data', (d) => {
    c.buf += d
    for (;;) {
      const end = c.buf.indexOf('\r\n\r\n')
      if (end < 0) return
      const len = Number(/content-length: (\d+)/i.exec(c.buf.slice(0, end))?.[1] ?? 0)
      if (c.buf.length < end + 4 + len) return
      const code = c.buf.slice(9, 12)
      c.buf = c.buf.slice(end + 4 + len)
      if (measuring) {
        status[code] = (status[code] ?? 0) + 1
        completed++
        hist.record((performance.now() - c.at) * 1000)
      }
      release(c)
    }
  })
  c.socket.on('error', () => {})
  return c
}

function send(c, at) {
  c.at = at
  c.socket.write(requestFor(c.target, sent++))
}

function release(c) {
  const waiting = dueAt[c.t]
  if (waiting.length > 0) send(c, waiting.shift())
  else idle[c.t].push(c)
}

const conns = Array.from({ length: o.connections }, (_, i) => connection(i))
await Promise.all(conns.map((c) => new Promise((r) => c.socket.once('connect', r))))
for (const c of conns) idle[c.t].push(c)

const start = performance.now()
const warm = (o.warmup ?? 0) * 1000
const total = warm + o.seconds * 1000
const tick = setInterval(() => {
  const now = performance.now()
  if (!measuring && now - start >= warm) {
    measuring = true
    t0 = now
    process.stdout.write('STARTED\n')
  }
  const want = Math.floor(((now - start) * o.rate) / 1000)
  for (; due < want; due++) {
    // Request n goes to target n mod targets: a round-robin Service.
    const at = start + (due * 1000) / o.rate
    const t = due % targets.length
    const c = idle[t].pop()
    if (c === undefined) {
      dueAt[t].push(at)
      if (measuring) late++
    } else send(c, at)
  }
  if (now - start >= total) {
    clearInterval(tick)
    const wallSec = (now - t0) / 1000
    measuring = false
    process.stdout.write(
      'BENCHJSON ' +
        JSON.stringify({
          completed,
          status,
          wallSec,
          late,
          latencyUs: { p50: hist.percentile(50), p99: hist.percentile(99), p999: hist.percentile(99.9), max: hist.max },
        }) +
        '\n',
    )
    for (const c of conns) c.socket.destroy()
    process.exit(0)
  }
}, 1)

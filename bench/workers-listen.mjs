#!/usr/bin/env node
// Issue 40: how worker threads can share one TCP port (the gRPC door's choice,
// docs/architecture.md, Threads). Two ways, one echo server in two worker threads each:
//   reuseport  each worker listens on the port itself with SO_REUSEPORT (what the node does)
//   fd         the main thread accepts (pauseOnConnect) and posts the socket's fd to a worker,
//              which wraps it in new net.Socket({ fd }); the main thread's handle must stay
//              open meanwhile, or it closes the descriptor under the worker
// Prints the time per connect + one echo (sequential connections, so it is the accept path's
// latency), the spread over the workers, and what the fd way does when the main thread
// finally closes the handles it kept: it closes descriptor numbers that now belong to other
// connections (the kernel reuses numbers the workers closed), which a client sees as an error.
//
//   node bench/workers-listen.mjs [--connections 200]
import net from 'node:net'
import { loadavg } from 'node:os'
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads'

if (!isMainThread) {
  const reply = (c) => c.on('data', () => c.write('pong' + workerData.index))
  if (workerData.mode === 'reuseport') {
    net.createServer(reply).listen({ port: workerData.port, host: '127.0.0.1', reusePort: true }, () => parentPort.postMessage('up'))
  } else {
    parentPort.on('message', (fd) => {
      const s = new net.Socket({ fd, readable: true, writable: true })
      s.on('error', () => {})
      reply(s)
    })
    parentPort.postMessage('up')
  }
} else {
  const { benchOptions } = await import('./lib/options.mjs')
  const { values } = benchOptions(import.meta.url, {
    about: `How worker threads can share one TCP port: SO_REUSEPORT in each worker against the main thread
accepting and posting each socket's fd to a worker; time per connect and echo, spread, and errors.`,
    options: { connections: { type: 'number', min: 1, default: 200, help: 'sequential connections per way' } },
  })
  const N = values.connections
  const start = (mode, port) => [0, 1].map((index) => new Worker(new URL(import.meta.url), { workerData: { mode, port, index } }))
  const up = (ws) => Promise.all(ws.map((w) => new Promise((r) => w.once('message', r))))
  const drive = async (port) => {
    const seen = [0, 0]
    let errors = 0
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < N; i++)
      await new Promise((resolve) => {
        const c = net.connect(port, '127.0.0.1', () => c.write('ping'))
        c.on('data', (d) => {
          seen[Number(String(d).at(-1))]++
          c.end()
          resolve()
        })
        c.on('error', () => (errors++, resolve()))
      })
    return { us: Number(process.hrtime.bigint() - t0) / N / 1000, seen, errors }
  }
  const freePort = () =>
    new Promise((r) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = s.address().port
        s.close(() => r(p))
      })
    })

  const load = loadavg()[0].toFixed(2)
  // reuseport
  const rport = await freePort()
  const rw = start('reuseport', rport)
  await up(rw)
  const r = await drive(rport)
  await Promise.all(rw.map((w) => w.terminate()))
  // fd hand-over
  const fw = start('fd')
  await up(fw)
  const held = []
  let next = 0
  const srv = net.createServer({ pauseOnConnect: true }, (s) => {
    held.push(s)
    fw[next++ % 2].postMessage(s._handle.fd)
  })
  await new Promise((res) => srv.listen(0, '127.0.0.1', res))
  const f = await drive(srv.address().port)
  // Open connections now, then the main thread lets go of what it kept.
  const open = await Promise.all(
    Array.from(
      { length: 20 },
      () =>
        new Promise((res) => {
          const c = net.connect(srv.address().port, '127.0.0.1', () => res(c))
          c.on('error', () => {})
        }),
    ),
  )
  await new Promise((res) => setTimeout(res, 100))
  let broken = 0
  for (const c of open) c.on('error', () => broken++).on('close', () => {})
  for (const s of held.splice(0, held.length - 20)) s.destroy()
  await Promise.all(
    open.map(
      (c) =>
        new Promise((res) => {
          c.write('ping')
          c.once('data', res)
          c.once('close', res)
          setTimeout(res, 300)
        }),
    ),
  )
  console.log(`load average ${load} at the start; ${N} sequential connections, connect + one echo each`)
  console.log(`| way | µs per connection | spread over 2 workers | failed |`)
  console.log(`|:--|--:|--:|--:|`)
  console.log(`| SO_REUSEPORT in each worker | ${r.us.toFixed(0)} | ${r.seen.join(' / ')} | ${r.errors} |`)
  console.log(`| fd hand-over from the main thread | ${f.us.toFixed(0)} | ${f.seen.join(' / ')} | ${f.errors} |`)
  console.log(`fd hand-over: after the main thread closed the ${N} handles it kept, ${broken} of 20 open connections failed (reused descriptor numbers)`)
  process.exit(0)
}

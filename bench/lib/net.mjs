// Loopback helpers: free ports, readiness polling, small HTTP GETs.
import { createServer } from 'node:net'
import http from 'node:http'
import https from 'node:https'

const handed = new Set()

/** A port that was free a moment ago on 127.0.0.1 (never the same one twice per run). */
export async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const srv = createServer()
      srv.once('error', reject)
      srv.listen(0, '127.0.0.1', () => {
        const { port } = srv.address()
        srv.close(() => resolve(port))
      })
    })
    if (!handed.has(port)) {
      handed.add(port)
      return port
    }
  }
}

/** GET url → { status, body } (self-signed certificates accepted). */
export function get(url, timeoutMs = 2000, headers = {}) {
  const mod = url.startsWith('https:') ? https : http
  return new Promise((resolve, reject) => {
    const req = mod.get(url, { rejectUnauthorized: false, timeout: timeoutMs, agent: false, headers }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d) => {
        body += d
      })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('timeout', () => req.destroy(new Error('timeout')))
    req.on('error', reject)
  })
}

/** POST a JSON body → { status, headers, body }. */
export function postJson(url, body, headers = {}, timeoutMs = 2000) {
  const mod = url.startsWith('https:') ? https : http
  const data = typeof body === 'string' ? body : JSON.stringify(body)
  return new Promise((resolve, reject) => {
    const req = mod.request(
      url,
      {
        method: 'POST',
        rejectUnauthorized: false,
        timeout: timeoutMs,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), ...headers },
      },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (d) => {
          text += d
        })
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: text }))
      },
    )
    req.on('timeout', () => req.destroy(new Error('timeout')))
    req.on('error', reject)
    req.end(data)
  })
}

/** Poll `check` (an async predicate; a throw counts as false) every 100 ms until it holds. */
export async function waitFor(check) {
  for (;;) {
    try {
      if (await check()) return
    } catch {
      /* not up yet */
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/**
 * Poll url until it answers 200. Fails early when the process `rec` has exited,
 * with the tail of its stderr.
 */
export async function waitReady(url, rec, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs
  let last = 'no answer'
  while (Date.now() < deadline) {
    if (rec && rec.exitCode !== undefined) {
      throw new Error(`${rec.name} exited (${rec.exitCode}) before ready: ${(rec.err || rec.out).trim().split('\n').slice(-5).join(' | ')}`)
    }
    try {
      const r = await get(url, 1000)
      if (r.status === 200) return
      last = `status ${r.status}`
    } catch (e) {
      last = e.code || e.message
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${rec ? rec.name : url} not ready after ${timeoutMs} ms (${last})`)
}

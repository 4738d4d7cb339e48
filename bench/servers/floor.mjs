// The floor: the least any uWebSockets.js JSON service can do per request.
// It reads the whole POST body, JSON.parses it, and answers a constant 200 JSON
// envelope of about the size of ringlimit's (so bytes written are comparable).
// No auth, no validation, no state. Every other row's CPU/request is divided by this one.
//
// Env: PORT (required), HOST (default 127.0.0.1), TLS_CERT_FILE + TLS_KEY_FILE (optional: HTTPS).
// The same uWebSockets.js build the service loads on this host (src/http/uws.ts picks it).
import { App, SSLApp } from '../../dist/src/http/uws.js'

const PORT = Number(process.env.PORT)
const HOST = process.env.HOST || '127.0.0.1'
const tls = process.env.TLS_CERT_FILE && process.env.TLS_KEY_FILE

const CONSTANT = JSON.stringify({
  id: 'req_00000000000000000000000000',
  timestamp: 0,
  api_version: 'v2026.8.23',
  object: 'rate_limit',
  data: {
    allowed: true,
    namespace: 'bench',
    identifier: 'floor',
    limit: 1000000,
    remaining: 999999,
    reset_time: 0,
    count: 1,
    algorithm: 'fixed-window',
    _request: { success: true, processing_time_ms: 0.01 },
  },
})

const app = tls ? SSLApp({ cert_file_name: process.env.TLS_CERT_FILE, key_file_name: process.env.TLS_KEY_FILE }) : App()

app.post('/limit', (res) => {
  let aborted = false
  res.onAborted(() => {
    aborted = true
  })
  let chunks = null
  res.onData((ab, isLast) => {
    // A view on uWS's buffer, valid only during this callback: parse it now,
    // or copy it (Buffer.from(Buffer) copies) when more chunks are to come.
    const chunk = Buffer.from(ab)
    if (!isLast) {
      ;(chunks ??= []).push(Buffer.from(chunk))
      return
    }
    const body = chunks === null ? chunk : Buffer.concat([...chunks, chunk])
    let status = '200 OK'
    try {
      JSON.parse(body.toString('utf8'))
    } catch {
      status = '400 Bad Request'
    }
    if (aborted) return
    res.cork(() => {
      res.writeStatus(status).writeHeader('Content-Type', 'application/json').end(CONSTANT)
    })
  })
})

app.get('/ready', (res) => {
  res.end('ok')
})
app.any('/*', (res) => {
  res.writeStatus('404 Not Found').end()
})

app.listen(HOST, PORT, (sock) => {
  if (!sock) {
    console.error(`floor: cannot listen on ${HOST}:${PORT}`)
    process.exit(1)
  }
})

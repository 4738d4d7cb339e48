// Starting the servers under test. Each starter returns a Server:
//   { urls: [base url per node], recs: [tracked child records], pgids: [...], stop() }
// Every process is started in its own group (see children.mjs) and stopped by group.
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { connect, createServer } from 'node:net'
import { spawnTracked, stopTracked } from './children.mjs'
import { freePort, get, waitReady } from './net.mjs'

const benchDir = new URL('..', import.meta.url).pathname
export const repoRoot = join(benchDir, '..')
export const ringlimitMain = join(repoRoot, 'dist/src/main.js')

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
/** `svc_sk_` + 40 random alphanumerics (the key format of the spec). */
export function makeApiKey() {
  const bytes = randomBytes(40)
  let s = 'svc_sk_'
  for (const b of bytes) s += ALNUM[b % ALNUM.length]
  return s
}

function server(recs, urls) {
  return {
    urls,
    recs,
    pgids: recs.map((r) => r.pid).filter((p) => p !== undefined),
    stop: () => Promise.all(recs.map((r) => stopTracked(r))),
  }
}

/** Start, and stop everything already started if readiness fails. */
async function guarded(recs, fn) {
  try {
    return await fn()
  } catch (e) {
    await Promise.all(recs.map((r) => stopTracked(r, 200)))
    throw e
  }
}

export function ringlimitAvailable() {
  return existsSync(ringlimitMain)
}

export function redisAvailable() {
  try {
    return execFileSync('redis-server', ['--version'], { encoding: 'utf8' }).trim()
  } catch {
    return null
  }
}

/**
 * A self-signed certificate for 127.0.0.1 (subjectAltName IP:127.0.0.1), made in JavaScript
 * by the tests' own maker (test/harness/certs.ts, built to dist/test/): no openssl CLI.
 * → { cert, key } file paths, and remove() for the temp folder holding them.
 */
export async function makeCert() {
  const { selfSignedCert } = await import(join(repoRoot, 'dist/test/harness/certs.js'))
  const cleanups = []
  const files = await selfSignedCert({ teardown: (fn) => cleanups.push(fn) }, { commonName: '127.0.0.1', ip: '127.0.0.1' })
  return { cert: files.certFile, key: files.keyFile, remove: () => cleanups.forEach((fn) => fn()) }
}

/**
 * The main.js of another build, for before/after rows: `--baseline DIR`, DIR a checkout built
 * there with `npm run build` (e.g. `git worktree add DIR <commit>`, `npm ci`, `npm run build`).
 * Every script takes a build in this one shape; exits with a clear message when DIR has none.
 */
export function buildMain(dir, flag = '--baseline') {
  const main = join(dir, 'dist/src/main.js')
  if (!existsSync(main)) {
    process.stderr.write(`bench: ${flag} ${dir}: no ${main} (run \`npm ci && npm run build\` there)\n`)
    process.exit(2)
  }
  return main
}

/**
 * One ringlimit node for a bench that places its nodes itself (ports, peers, builds): the
 * build's main.js, loopback, LOG_LEVEL warn unless `env` says otherwise, in its own process
 * group and tracked (children.mjs), so installCleanup kills it with the bench. Returns the
 * tracked record: `pid`, `exited`, and the output kept as `stdout` says ('all' for a log).
 */
export function spawnNode(name, env, { main = ringlimitMain, stdout } = {}) {
  return spawnTracked(name, process.execPath, [main], { cwd: repoRoot, env: { HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...env }, stdout })
}

export async function startFloor({ tls } = {}) {
  const port = await freePort()
  const env = { PORT: String(port), HOST: '127.0.0.1', ...(tls ? { TLS_CERT_FILE: tls.cert, TLS_KEY_FILE: tls.key } : {}) }
  const rec = spawnTracked('floor', process.execPath, [join(benchDir, 'servers/floor.mjs')], { env, cwd: benchDir })
  const url = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`
  return guarded([rec], async () => {
    await waitReady(url + '/ready', rec)
    return server([rec], [url])
  })
}

function pingRedis(port) {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1')
    let buf = ''
    s.setTimeout(500, () => {
      s.destroy()
      resolve(false)
    })
    s.on('connect', () => s.write('PING\r\n'))
    s.on('data', (d) => {
      buf += d
      if (buf.includes('\r\n')) {
        s.destroy()
        resolve(buf.startsWith('+PONG'))
      }
    })
    s.on('error', () => resolve(false))
  })
}

async function startRedis() {
  const port = await freePort()
  const rec = spawnTracked('redis-server', 'redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--loglevel',
    'warning',
  ])
  const deadline = Date.now() + 10000
  while (!(await pingRedis(port))) {
    if (rec.exitCode !== undefined) throw new Error(`redis-server exited: ${rec.err || rec.out}`)
    if (Date.now() > deadline) {
      await stopTracked(rec, 200)
      throw new Error('redis-server not ready after 10 s')
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return { rec, port }
}

export async function startFastify({ store, apiKey }) {
  const recs = []
  const env = { HOST: '127.0.0.1', API_KEY: apiKey, STORE: store }
  return guarded(recs, async () => {
    if (store === 'redis') {
      const r = await startRedis()
      recs.push(r.rec)
      env.REDIS_PORT = String(r.port)
    }
    const port = await freePort()
    env.PORT = String(port)
    const rec = spawnTracked(`fastify-rlf(${store})`, process.execPath, [join(benchDir, 'servers/fastify-rlf.mjs')], { env, cwd: benchDir })
    recs.push(rec)
    const url = `http://127.0.0.1:${port}`
    await waitReady(url + '/ready', rec)
    return server(recs, [url])
  })
}

/**
 * What the start a user runs sets beside the service's own settings (the Dockerfile's ENV and
 * `npm start`, docs/operations.md "Memory"): glibc's mmap threshold fixed at 128 KiB, so the
 * state tables' growth steps are mapped on their own and given back when freed instead of
 * staying in malloc's arena. BENCH_MMAP_THRESHOLD=glibc starts the nodes without it (glibc's
 * own dynamic threshold), for a before/after; another value replaces it. Not through
 * MALLOC_MMAP_THRESHOLD_ itself: the bench's own process and its loaders would take it too
 * (and set empty it is a threshold of 0: every allocation mapped).
 */
const threshold = process.env.BENCH_MMAP_THRESHOLD ?? '131072'
export const startEnv = threshold === 'glibc' ? {} : { MALLOC_MMAP_THRESHOLD_: threshold }

/**
 * ringlimit from the repo's build: `node dist/src/main.js`, configured by environment.
 * nodes > 1: a static-peer cluster on loopback sharing a random CLUSTER_SECRET.
 */
export async function startRinglimit({ apiKey, nodes = 1, tls, maxKeys = 5000000, extraEnv = {}, nodeArgs = [], main = ringlimitMain }) {
  const ports = []
  for (let i = 0; i < nodes; i++) ports.push({ http: await freePort(), peer: await freePort() })
  const common = {
    HOST: '127.0.0.1',
    API_KEYS: apiKey,
    LOG_LEVEL: 'warn',
    MAX_KEYS: String(maxKeys),
    PEER_HOST: '127.0.0.1',
    ...startEnv,
    ...(tls ? { TLS_CERT_FILE: tls.cert, TLS_KEY_FILE: tls.key } : {}),
    ...extraEnv,
  }
  if (nodes > 1) {
    common.PEERS = ports.map((p) => `127.0.0.1:${p.peer}`).join(',')
    common.CLUSTER_SECRET = randomBytes(32).toString('hex')
  }
  const recs = ports.map((p, i) =>
    spawnTracked(`ringlimit${nodes > 1 ? ' n' + (i + 1) : ''}`, process.execPath, [...nodeArgs, main], {
      cwd: repoRoot,
      env: { ...common, PORT: String(p.http), PEER_PORT: String(p.peer), ...(nodes > 1 ? { NODE_ID: `n${i + 1}` } : {}) },
    }),
  )
  const scheme = tls ? 'https' : 'http'
  const urls = ports.map((p) => `${scheme}://127.0.0.1:${p.http}`)
  return guarded(recs, async () => {
    await Promise.all(urls.map((u, i) => waitReady(u + '/ready', recs[i], 30000)))
    return server(recs, urls)
  })
}

/** A port that was free a moment ago on `host` (a loopback address other than 127.0.0.1). */
function freePortOn(host) {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, host, () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

/**
 * gubernator v2 from a binary built by hand (`--gubernator PATH`, bench/README.md says how),
 * `nodes` daemons with its defaults. A cluster of them on one machine needs what a cluster of
 * machines has: memberlist names a member by its hostname, so each daemon runs in its own UTS
 * namespace (`unshare --uts`, root) under the name guber-n<i>, and each has its own loopback
 * address (127.0.0.2, .3, ...: gubernator advertises and gossips an address, not a port range).
 * Ready when every daemon's /v1/HealthCheck is healthy and counts all `nodes` peers.
 */
export async function startGubernator({ bin, nodes = 1 }) {
  const hosts = Array.from({ length: nodes }, (_, i) => `127.0.0.${2 + i}`)
  const ports = []
  for (const h of hosts) ports.push({ http: await freePortOn(h), grpc: await freePortOn(h), gossip: await freePortOn(h) })
  const known = `${hosts[0]}:${ports[0].gossip}`
  const recs = hosts.map((h, i) =>
    spawnTracked(`gubernator n${i + 1}`, 'unshare', ['--uts', 'sh', '-c', `hostname guber-n${i + 1} && exec "$0"`, bin], {
      env: {
        GUBER_HTTP_ADDRESS: `${h}:${ports[i].http}`,
        GUBER_GRPC_ADDRESS: `${h}:${ports[i].grpc}`,
        GUBER_ADVERTISE_ADDRESS: `${h}:${ports[i].grpc}`,
        GUBER_PEER_DISCOVERY_TYPE: 'member-list',
        GUBER_MEMBERLIST_ADDRESS: `${h}:${ports[i].gossip}`,
        // Without it memberlist binds 0.0.0.0:7946 whatever it advertises: one daemon per machine.
        GUBER_MEMBERLIST_BIND_ADDRESS: `${h}:${ports[i].gossip}`,
        GUBER_MEMBERLIST_KNOWN_NODES: known,
        GUBER_LOG_LEVEL: 'warn',
      },
    }),
  )
  const urls = hosts.map((h, i) => `http://${h}:${ports[i].http}`)
  return guarded(recs, async () => {
    const deadline = Date.now() + 30000
    for (const [i, u] of urls.entries()) {
      let last = 'no answer'
      for (;;) {
        if (recs[i].exitCode !== undefined)
          throw new Error(`${recs[i].name} exited (${recs[i].exitCode}): ${(recs[i].err || recs[i].out).trim().split('\n').slice(-3).join(' | ')}`)
        if (Date.now() > deadline) throw new Error(`${recs[i].name} not ready after 30 s (${last})`)
        try {
          const r = await get(u + '/v1/HealthCheck', 1000)
          const h = JSON.parse(r.body)
          if (r.status === 200 && h.status === 'healthy' && Number(h.peer_count) === nodes) break
          last = r.body.slice(0, 200)
        } catch (e) {
          last = e.code || e.message
        }
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
    return server(recs, urls)
  })
}

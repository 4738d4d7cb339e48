#!/usr/bin/env node
// The shares invariant through the events of issue 32 (docs/shares.md): real nodes on loopback,
// fixed windows of limit 2,048 (shared), requests driven round-robin over the nodes as a
// Kubernetes Service does; what is counted is answers allowed WITHOUT `degraded`.
//
//   npm run build && node bench/shares-events.mjs [--root DIR] [--rows LIST] [--other DIR]
//
// --root: a checkout built with `npm run build` (its dist/test/harness starts its own nodes):
// the "before" figures come from the landed build, the "after" ones from this one. --other:
// the versions row's second build. docs/shares.md, "Measured", has the figures and commands.
//
// Rows:
//   policy  the owner holds a deny override of the keys, the other two nodes no policy yet
//           (a ConfigMap roll): allowed undegraded of 4 keys × 300 requests (should be 0)
//   reset   node 0 holds a grant of a key, is paused (SIGSTOP) across the key's reset on its
//           owner and past the owner's idle timeout, wakes and stays idle 3 s (it gives the
//           erased grant back), then all three drive the key to refusal:
//           allowed undegraded after the reset (at most 2,048)
//   reset-brief the same, node 0 paused 1.5 s only (less than FAILURE_TIMEOUT_MS; the notice's
//           call times out after PEER_TIMEOUT_MS 300 while the connection stays up)
//   scale   4 nodes, then 2 leave (SIGTERM) and 1 comes back, within one 60 s window, 4 keys
//           (one per owner; the leaving node's passes to the one that comes back) driven
//           round-robin between events: allowed undegraded per key in the window (at most 2,048)
//   dns     PEERS_DNS (a DNS server on loopback, as a headless Service), three pods on 127.0.0.x;
//           the two beside 127.0.0.1 are replaced 14 times (SIGTERM, out of the records, a new
//           address in), then in a fresh window 4 keys of limit 2,048 and one of 1,000,000
//           (cost 64 a request) that 127.0.0.1 owns are driven to refusal: allowed undegraded
//   failover 3 nodes (REPLICATION_DELAY_MS 1,000, so the kill lands inside the delay every run),
//           8 keys node 1 owns driven round-robin; 2.5 s later one request of each key on each
//           member (share used up: forwarded, and a LEASE asked), node 1 SIGKILLed 300 ms
//           later (its grants unreplicated); the two left idle 3 s (grants go back), then the
//           keys drained on them: allowed undegraded per key (at most 2,048 + the durability
//           bound: the 2 forwarded decisions per key the dead owner had not replicated)
//   peers   static PEERS, 40 keys of limit 30, 60 requests each round-robin: a fourth node
//           started with a list of four beside three listing three; then the first node
//           restarted with the list of four: allowed undegraded beyond 30, per step
//   versions two builds of different peer protocol versions as one cluster (nodes 0 and 1 from
//           --root, node 2 from --other): 150 keys of limit 30 × 45 requests and one of 2,048 ×
//           2,400, round-robin, all in flight: allowed undegraded beyond the limits
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { benchOptions } from './lib/options.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `The shares invariant through issue 32's events on real nodes (docs/shares.md): a policy
roll, a member paused across a reset, a scale 4 -> 2 -> 3 in one window, pods replaced under
PEERS_DNS, an owner SIGKILLed after granting, a static PEERS list edited, mixed protocol
versions; allowed undegraded answers against the limit. --root names the checkout whose build and test harness start the nodes.`,
  options: {
    root: { type: 'string', arg: 'DIR', defaultText: 'this checkout', help: 'a checkout built with npm run build (its dist/test/harness starts its nodes)' },
    rows: { type: 'string', arg: 'LIST', default: 'policy,reset,scale,dns,failover,peers', help: 'rows to run, comma-separated (versions needs --other)' },
    other: {
      type: 'string',
      arg: 'DIR',
      defaultText: 'none',
      help: 'the versions row: another checkout, built, of different peer protocol versions (its node 2)',
    },
  },
})
args.root ??= path.resolve(path.dirname(new URL(import.meta.url).pathname), '..')
const built = (root, file) => import(pathToFileURL(path.join(root, 'dist', file)).href)
const harness = (file) => built(args.root, path.join('test/harness', file))
const { startCluster, hit, waitForRing } = await harness('cluster.js')
const { post, request, AUTH_HEADER, closeAgents } = await harness('http-client.js')
const get = (node, p) => request(node.url + p, { headers: AUTH_HEADER, timeoutMs: 2000 }).catch(() => ({ status: 0 }))
const L = 2048
const D = 60
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Sleep until a window of D seconds begins that leaves `needS` seconds in it and starts `afterMs` from now at least. */
async function freshWindow(afterMs = 3500, needS = 40) {
  const Dm = D * 1000
  let start = Math.ceil((Date.now() + afterMs) / Dm) * Dm
  if (start + Dm - Date.now() < needS * 1000) start += Dm
  await sleep(start - Date.now() + 30)
  return start
}

/**
 * `n` requests of `id`, round-robin over `nodes`, 30 at once: allowed undegraded (in units of
 * `extra.cost`, 1 by default), degraded. `extra.limit` overrides the limit of 2,048.
 */
async function drive(nodes, id, n, extra = {}) {
  let allowed = 0
  let degraded = 0
  for (let b = 0; b < n; b += 30) {
    const rs = await Promise.all(
      Array.from({ length: Math.min(30, n - b) }, (_, i) =>
        hit(nodes[(b + i) % nodes.length], id, extra.limit ?? L, { duration: D, ...extra }).catch(() => undefined),
      ),
    )
    for (const r of rs) {
      if (r === undefined) continue
      if (r.json?.data?.degraded !== undefined) degraded++
      else if (r.status === 200) allowed += extra.cost ?? 1
    }
  }
  return { allowed, degraded }
}

/** Drive until two rounds in a row (1.5 s apart, so idle grants go back) allow nothing. */
async function drain(nodes, id, extra = {}) {
  let allowed = 0
  let degraded = 0
  for (let quiet = 0; quiet < 2;) {
    const r = await drive(nodes, id, 30 * nodes.length, extra)
    allowed += r.allowed
    degraded += r.degraded
    quiet = r.allowed === 0 ? quiet + 1 : 0
    if (r.allowed === 0) await sleep(1500)
  }
  return { allowed, degraded }
}

/** Every key `perKey` times, round-robin over `nodes`, all in flight at once (a burst through a Service): allowed undegraded per key. */
async function burst(nodes, keys, lim, perKey) {
  const admitted = keys.map(() => 0)
  const sends = []
  for (let i = 0; i < perKey; i++) {
    keys.forEach((id, k) => {
      sends.push(
        hit(nodes[(i + k) % nodes.length], id, lim, { duration: 3600 }).then(
          (r) => {
            if (r.status === 200 && r.json?.data?.degraded === undefined) admitted[k]++
          },
          () => {},
        ),
      )
    })
  }
  await Promise.all(sends)
  return admitted
}

const overOf = (admitted, lim) => admitted.reduce((sum, a) => sum + Math.max(0, a - lim), 0)

const run = Date.now().toString(36)
const rows = args.rows.split(',')

if (rows.includes('policy')) {
  const dir = mkdtempSync(path.join(tmpdir(), 'shares-policy-'))
  writeFileSync(path.join(dir, 'overrides.yaml'), 'overrides:\n  - {namespace: test, identifier: "deny-*", limit: 0}\n')
  const cluster = await startCluster(3, {}, (i) => (i === 1 ? { POLICY_PATH: dir } : {}))
  try {
    await freshWindow()
    let allowed = 0
    let degraded = 0
    for (let k = 0; k < 4; k++) {
      const id = cluster.identifierOwnedBy(1, `deny-${run}-${k}`)
      const r = await drive(cluster.nodes, id, 300)
      allowed += r.allowed
      degraded += r.degraded
    }
    console.log(JSON.stringify({ row: 'policy', keys: 4, requests: 1200, allowedUndegraded: allowed, degraded, limitApplied: 0 }))
  } finally {
    await cluster.stop()
  }
}

/**
 * The reset row: node 0 holds a grant of a key its owner (node 1) resets while node 0 is
 * paused for `pauseMs` (undefined: until 4 s after the owner counted on past the reset); `env`
 * adds settings to the nodes.
 */
async function resetRow(name, pauseMs, env) {
  const cluster = await startCluster(3, env)
  try {
    const nodes = cluster.nodes
    const results = []
    for (let k = 0; k < 3; k++) {
      await freshWindow(3500, 45)
      const id = cluster.identifierOwnedBy(1, `${name}-${run}-${k}`)
      // 10 of node 0's share of 16: it asks a LEASE grant of 16.
      for (let i = 0; i < 10; i++) await hit(nodes[0], id, L, { duration: D })
      await sleep(300)
      const stoppedAt = Date.now()
      nodes[0].signal('SIGSTOP')
      await sleep(200)
      await post(nodes[2].url, '/limit/reset', { namespace: 'test', identifier: id })
      // The owner counts on after the reset (node 0 still paused).
      const during = await drive([nodes[1], nodes[2]], id, 200)
      await sleep(pauseMs === undefined ? 4000 : Math.max(0, stoppedAt + pauseMs - Date.now()))
      nodes[0].signal('SIGCONT')
      await waitForRing(nodes, 3, 20_000).catch(() => {})
      // Idle past RETURN_IDLE_MS: node 0 gives back the grant the reset erased.
      await sleep(3000)
      const first = await drive(nodes, id, 2400)
      const rest = await drain(nodes, id)
      results.push({ allowed: during.allowed + first.allowed + rest.allowed, degraded: during.degraded + first.degraded + rest.degraded })
    }
    console.log(
      JSON.stringify({ row: name, limit: L, pauseMs, afterResetAllowedUndegraded: results.map((r) => r.allowed), degraded: results.map((r) => r.degraded) }),
    )
  } finally {
    await cluster.stop()
  }
}

// Past the owner's idle timeout of node 0's connection and FAILURE_TIMEOUT_MS (3 s here).
if (rows.includes('reset')) await resetRow('reset', undefined, {})
// Shorter than FAILURE_TIMEOUT_MS, the notice's call timing out (PEER_TIMEOUT_MS 300) while
// the connection stays up: the notice waits in node 0's socket until it wakes.
if (rows.includes('reset-brief')) await resetRow('reset-brief', 1500, { PEER_TIMEOUT_MS: '300' })

if (rows.includes('scale')) {
  const results = []
  for (let k = 0; k < 2; k++) {
    const cluster = await startCluster(4)
    try {
      const nodes = cluster.nodes
      // Four keys, one per owner on the four: node 3 owns the first (it leaves, so the key is
      // handed off) and node 2 the same key on the final three (it comes back as a fresh
      // process and takes it over: a second hand-off, to a node that held back nothing for
      // the shares answered under node 3).
      const three = cluster.members.slice(0, 3)
      const ids = []
      for (let i = 0; ids.length === 0; i++) {
        const c = `scale-${run}-${k}-${i}`
        if (cluster.ownerOf('test', c) === 3 && cluster.ownerOf('test', c, three) === 2) ids.push(c)
      }
      for (const owner of [0, 1, 2]) ids.push(cluster.identifierOwnedBy(owner, `scale-${run}-${k}-of${owner}`))
      await freshWindow(3500, 50)
      const allowed = ids.map(() => 0)
      let degraded = 0
      const step = async (on, n) => {
        const rs = await Promise.all(ids.map((id) => drive(on, id, n)))
        rs.forEach((r, j) => {
          allowed[j] += r.allowed
          degraded += r.degraded
        })
      }
      await step(nodes, 400)
      for (const i of [3, 2]) {
        nodes[i].signal('SIGTERM')
        await nodes[i].exited
      }
      await waitForRing([nodes[0], nodes[1]], 2, 20_000)
      await step([nodes[0], nodes[1]], 400)
      const back = await cluster.restart(2)
      await waitForRing([nodes[0], nodes[1], back], 3, 20_000)
      await step([nodes[0], nodes[1], back], 1400)
      const rest = await Promise.all(ids.map((id) => drain([nodes[0], nodes[1], back], id)))
      rest.forEach((r, j) => {
        allowed[j] += r.allowed
        degraded += r.degraded
      })
      results.push({ allowed, degraded })
    } finally {
      await cluster.stop()
    }
  }
  console.log(
    JSON.stringify({
      row: 'scale 4→2→3',
      limit: L,
      allowedUndegraded: results.map((r) => r.allowed),
      over: results.map((r) => overOf(r.allowed, L)),
      degraded: results.map((r) => r.degraded),
    }),
  )
}

if (rows.includes('dns')) {
  const { startDnsServer } = await harness('dns-server.js')
  const { spawnNode } = await harness('node-process.js')
  const { freePort } = await harness('ports.js')
  const { CLUSTER_SECRET, PATIENT_PEERS } = await harness('cluster.js')
  const { HashRing } = await built(args.root, 'src/shard/ring/ring.js')
  const { ringKeyOf } = await built(args.root, 'src/shard/ring/state-key.js')
  const dns = await startDnsServer()
  const name = `ringlimit-${run}.bench`
  const peerPort = await freePort()
  const spawnAt = (ip) =>
    spawnNode({
      HOST: ip,
      PEER_HOST: ip,
      PEER_PORT: String(peerPort),
      PEERS_DNS: `${name}:${peerPort}`,
      DNS_SERVER: dns.address,
      DNS_INTERVAL_MS: '200',
      CLUSTER_SECRET,
      ...PATIENT_PEERS,
      DRAIN_TIMEOUT_MS: '5000',
    })
  const pods = new Map() // address -> node
  try {
    const first = ['127.0.0.1', '127.0.0.2', '127.0.0.3']
    dns.setRecords(name, first)
    for (const ip of first) pods.set(ip, await spawnAt(ip))
    await waitForRing([...pods.values()], 3, 60_000)
    // 14 replacements, the oldest pod beside 127.0.0.1 first, as a rolling restart does to a
    // Deployment: out of the records and SIGTERM, then a new address in and its pod started.
    for (let r = 0; r < 14; r++) {
      const old = [...pods.keys()].find((ip) => ip !== '127.0.0.1')
      const node = pods.get(old)
      pods.delete(old)
      dns.setRecords(name, [...pods.keys()])
      node.signal('SIGTERM')
      await node.exited
      const ip = `127.0.0.${4 + r}`
      dns.setRecords(name, [...pods.keys(), ip])
      pods.set(ip, await spawnAt(ip))
      await waitForRing([...pods.values()], 3, 60_000)
    }
    const nodes = [...pods.values()]
    const ring = new HashRing([...pods.keys()].map((ip) => `${ip}:${peerPort}`))
    const ownedByFirst = (prefix) => {
      for (let i = 0; ; i++) if (ring.owner(ringKeyOf('test', `${prefix}-${i}`)) === `127.0.0.1:${peerPort}`) return `${prefix}-${i}`
    }
    const windowStart = await freshWindow(3500, 55)
    const small = await Promise.all(
      [0, 1, 2, 3].map(async (k) => {
        const id = ownedByFirst(`dns-${run}-${k}`)
        const a = await drive(nodes, id, 2400)
        const b = await drain(nodes, id)
        return a.allowed + b.allowed
      }),
    )
    const bigId = ownedByFirst(`dns-big-${run}`)
    const big = { limit: 1_000_000, cost: 64 }
    const a = await drive(nodes, bigId, Math.ceil(1_050_000 / 64), big)
    const b = await drain(nodes, bigId, big)
    console.log(
      JSON.stringify({
        row: 'dns (14 pods replaced)',
        limit: [L, 1_000_000],
        allowedUndegraded: small,
        overOn4Keys: overOf(small, L),
        bigAllowedUndegraded: a.allowed + b.allowed,
        oneWindow: Date.now() < windowStart + D * 1000,
      }),
    )
  } finally {
    await Promise.all([...pods.values()].map((n) => n.kill()))
    await dns.close()
  }
}

if (rows.includes('failover')) {
  const results = []
  for (let attempt = 0; attempt < 2; attempt++) {
    // A replication delay of 1 s, not 10 ms: the owner dies inside it every run, not by chance.
    const cluster = await startCluster(3, { REPLICATION_DELAY_MS: '1000' })
    try {
      const nodes = cluster.nodes
      const ids = Array.from({ length: 8 }, (_, k) => cluster.identifierOwnedBy(1, `fo-${run}-${attempt}-${k}`))
      await freshWindow(3500, 45)
      const first = await Promise.all(ids.map((id) => drive(nodes, id, 600)))
      // Replicated, and the members' idle grants given back to the owner that granted them.
      await sleep(2500)
      // One request of each key on each member: its share by rule is used up, so it goes to
      // the owner and a LEASE is asked beside it. The grants are counted on the owner and not
      // yet replicated when it dies, 300 ms later.
      const last = await Promise.all(ids.map((id) => drive([nodes[0], nodes[2]], id, 2)))
      await sleep(300)
      nodes[1].signal('SIGKILL')
      await nodes[1].exited
      await waitForRing([nodes[0], nodes[2]], 2, 20_000)
      // Idle past RETURN_IDLE_MS: the dead owner's grants, unspent, go back (before: to the
      // promoted replica, which refunded what it never counted).
      await sleep(3000)
      const rest = await Promise.all(ids.map((id) => drain([nodes[0], nodes[2]], id)))
      results.push(ids.map((_, k) => first[k].allowed + last[k].allowed + rest[k].allowed))
    } finally {
      await cluster.stop()
    }
  }
  console.log(
    JSON.stringify({ row: 'failover (owner SIGKILLed after granting)', limit: L, allowedUndegraded: results, over: results.map((r) => overOf(r, L)) }),
  )
}

/** Until `node` answers /ready 200 (before: the node of another list did), 20 s at most (after: it never does). */
async function settle(node) {
  const until = Date.now() + 20_000
  while (Date.now() < until && (await get(node, '/ready')).status !== 200) await sleep(250)
  await sleep(2000)
}

if (rows.includes('peers')) {
  const { spawnNode } = await harness('node-process.js')
  const { freePort } = await harness('ports.js')
  const cluster = await startCluster(3)
  const started = []
  try {
    const [a, b, c] = cluster.nodes
    const dPeer = await freePort()
    const four = [...cluster.members, `127.0.0.1:${dPeer}`].join(',')
    const d = await spawnNode({ ...cluster.env[0], PORT: String(await freePort()), PEER_PORT: String(dPeer), PEERS: four }, { waitReady: false })
    started.push(d)
    await settle(d) // the new node connects, and (before) builds its own ring and turns ready
    const keys = (step) => Array.from({ length: 40 }, (_, k) => `peers-${run}-${step}-${k}`)
    const adding = await burst([a, b, c, d], keys('add'), 30, 60)
    await a.kill()
    const a2 = await spawnNode({ ...cluster.env[0], PEERS: four }, { waitReady: false })
    started.push(a2)
    await settle(a2)
    const editing = await burst([a2, b, c, d], keys('edit'), 30, 60)
    console.log(
      JSON.stringify({
        row: 'peers (static list edited)',
        limit: 30,
        keys: 40,
        overAdding: overOf(adding, 30),
        keysOverAdding: adding.filter((a) => a > 30).length,
        overEditing: overOf(editing, 30),
        keysOverEditing: editing.filter((a) => a > 30).length,
      }),
    )
  } finally {
    await Promise.all(started.map((n) => n.kill()))
    await cluster.stop()
  }
}

if (rows.includes('versions')) {
  if (args.other === undefined) throw new Error('the versions row needs --other DIR (a built checkout of other peer protocol versions)')
  const { spawnNode } = await harness('node-process.js')
  const { spawnNode: spawnOther } = await built(args.other, 'test/harness/node-process.js')
  const { freePort } = await harness('ports.js')
  const { CLUSTER_SECRET, PATIENT_PEERS } = await harness('cluster.js')
  const http = [await freePort(), await freePort(), await freePort()]
  const peer = [await freePort(), await freePort(), await freePort()]
  const env = (i) => ({
    PORT: String(http[i]),
    PEER_HOST: '127.0.0.1',
    PEER_PORT: String(peer[i]),
    PEERS: peer.map((p) => `127.0.0.1:${p}`).join(','),
    CLUSTER_SECRET,
    ...PATIENT_PEERS,
  })
  // Not waiting for /ready: a node that cannot join may say so by staying unready.
  const nodes = await Promise.all([0, 1, 2].map((i) => (i === 2 ? spawnOther : spawnNode)(env(i), { waitReady: false })))
  try {
    await sleep(10_000)
    const views = await Promise.all(
      nodes.map(async (n) => {
        const r = await get(n, '/cluster')
        const ready = (await get(n, '/ready')).status
        return { ready, ring: r.json?.data?.members?.length, protocol: r.json?.data?.protocol }
      }),
    )
    const keys = Array.from({ length: 150 }, (_, k) => `v-${run}-${k}`)
    const small = await burst(nodes, keys, 30, 45)
    const [large] = await burst(nodes, [`v-big-${run}`], L, 2400)
    console.log(
      JSON.stringify({
        row: 'versions (mixed builds)',
        builds: [args.root, args.root, args.other],
        views,
        over30On150Keys: overOf(small, 30),
        keysOver: small.filter((a) => a > 30).length,
        largeAllowedUndegraded: large,
      }),
    )
  } finally {
    await Promise.all(nodes.map((n) => n.kill()))
  }
}
await closeAgents()

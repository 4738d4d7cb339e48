#!/usr/bin/env node
// The shares invariant through the events of issue 32 (docs/shares.md): real nodes on loopback,
// fixed windows of limit 2,048 (shared), requests driven round-robin over the nodes as a
// Kubernetes Service does; what is counted is answers allowed WITHOUT `degraded`.
//
//   npm run build && node bench/shares-events.mjs [--root DIR] [--rows policy,reset,scale]
//
// --root: a checkout built with `npm run build` (its dist/test/harness starts its own nodes):
// the "before" figures come from the landed build, the "after" ones from this one.
//
// Rows:
//   policy  the owner holds a deny override of the keys, the other two nodes no policy yet
//           (a ConfigMap roll): allowed undegraded of 4 keys × 300 requests (should be 0)
//   reset   node 0 holds a grant of a key, is paused (SIGSTOP) across the key's reset on its
//           owner and past the owner's idle timeout, wakes and stays idle 3 s (it gives the
//           erased grant back), then all three drive the key to refusal:
//           allowed undegraded after the reset (at most 2,048)
//   scale   4 nodes, then 2 leave (SIGTERM) and 1 comes back, within one 60 s window, the key
//           driven round-robin between events: allowed undegraded in the window (at most 2,048)
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { benchOptions } from './lib/options.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `The shares invariant through issue 32's events on real nodes (docs/shares.md): a policy
roll, a member paused across a reset, a scale 4 -> 2 -> 3 in one window; allowed undegraded
answers against the limit. --root names the checkout whose build and test harness start the nodes.`,
  options: {
    root: { type: 'string', arg: 'DIR', defaultText: 'this checkout', help: 'a checkout built with npm run build (its dist/test/harness starts its nodes)' },
    rows: { type: 'string', arg: 'LIST', default: 'policy,reset,scale', help: 'rows to run, comma-separated' },
  },
})
args.root ??= path.resolve(path.dirname(new URL(import.meta.url).pathname), '..')
const harness = (file) => import(pathToFileURL(path.join(args.root, 'dist/test/harness', file)).href)
const { startCluster, hit, waitForRing } = await harness('cluster.js')
const { post, closeAgents } = await harness('http-client.js')
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

/** `n` requests of `id`, round-robin over `nodes`, 30 at once: allowed undegraded, degraded. */
async function drive(nodes, id, n, extra = {}) {
  let allowed = 0
  let degraded = 0
  for (let b = 0; b < n; b += 30) {
    const rs = await Promise.all(
      Array.from({ length: Math.min(30, n - b) }, (_, i) => hit(nodes[(b + i) % nodes.length], id, L, { duration: D, ...extra }).catch(() => undefined)),
    )
    for (const r of rs) {
      if (r === undefined) continue
      if (r.json?.data?.degraded !== undefined) degraded++
      else if (r.status === 200) allowed++
    }
  }
  return { allowed, degraded }
}

/** Drive until two rounds in a row (1.5 s apart, so idle grants go back) allow nothing. */
async function drain(nodes, id) {
  let allowed = 0
  let degraded = 0
  for (let quiet = 0; quiet < 2;) {
    const r = await drive(nodes, id, 30 * nodes.length)
    allowed += r.allowed
    degraded += r.degraded
    quiet = r.allowed === 0 ? quiet + 1 : 0
    if (r.allowed === 0) await sleep(1500)
  }
  return { allowed, degraded }
}

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

if (rows.includes('reset')) {
  const cluster = await startCluster(3)
  try {
    const nodes = cluster.nodes
    const results = []
    for (let k = 0; k < 3; k++) {
      await freshWindow(3500, 45)
      const id = cluster.identifierOwnedBy(1, `reset-${run}-${k}`)
      // 10 of node 0's share of 16: it asks a LEASE grant of 16.
      for (let i = 0; i < 10; i++) await hit(nodes[0], id, L, { duration: D })
      await sleep(300)
      nodes[0].signal('SIGSTOP')
      await sleep(200)
      await post(nodes[2].url, '/limit/reset', { namespace: 'test', identifier: id })
      // The owner counts on after the reset (node 0 still paused), past its idle timeout of node
      // 0's connection and FAILURE_TIMEOUT_MS (3 s here).
      const during = await drive([nodes[1], nodes[2]], id, 200)
      await sleep(4000)
      nodes[0].signal('SIGCONT')
      await waitForRing(nodes, 3, 20_000).catch(() => {})
      // Idle past RETURN_IDLE_MS: node 0 gives back the grant the reset erased.
      await sleep(3000)
      const first = await drive(nodes, id, 2400)
      const rest = await drain(nodes, id)
      results.push({ allowed: during.allowed + first.allowed + rest.allowed, degraded: during.degraded + first.degraded + rest.degraded })
    }
    console.log(
      JSON.stringify({ row: 'reset', limit: L, afterResetAllowedUndegraded: results.map((r) => r.allowed), degraded: results.map((r) => r.degraded) }),
    )
  } finally {
    await cluster.stop()
  }
}

if (rows.includes('scale')) {
  const results = []
  for (let k = 0; k < 2; k++) {
    const cluster = await startCluster(4)
    try {
      const nodes = cluster.nodes
      // A key node 3 owns on 4 nodes: it leaves, so the key is handed off.
      const id = cluster.identifierOwnedBy(3, `scale-${run}-${k}`)
      await freshWindow(3500, 50)
      let allowed = 0
      let degraded = 0
      const add = (r) => {
        allowed += r.allowed
        degraded += r.degraded
      }
      add(await drive(nodes, id, 400))
      for (const i of [3, 2]) {
        nodes[i].signal('SIGTERM')
        await nodes[i].exited
      }
      await waitForRing([nodes[0], nodes[1]], 2, 20_000)
      add(await drive([nodes[0], nodes[1]], id, 400))
      const back = await cluster.restart(2)
      await waitForRing([nodes[0], nodes[1], back], 3, 20_000)
      add(await drive([nodes[0], nodes[1], back], id, 1400))
      add(await drain([nodes[0], nodes[1], back], id))
      results.push({ allowed, degraded })
    } finally {
      await cluster.stop()
    }
  }
  console.log(JSON.stringify({ row: 'scale 4→2→3', limit: L, allowedUndegraded: results.map((r) => r.allowed), degraded: results.map((r) => r.degraded) }))
}
await closeAgents()

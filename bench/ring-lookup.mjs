// Ring lookup cost: ringlimit's ring (FNV-1a + fmix32, binary search) against hashring@3 (MD5, ketama).
// Run after `npm run build`: node bench/ring-lookup.mjs
import { RunConditions } from './lib/conditions.mjs'
import { benchOptions } from './lib/options.mjs'

benchOptions(import.meta.url, {
  about: `Ring lookup cost, in-process: ringlimit's ring (FNV-1a + fmix32, binary search) against
hashring@3 (MD5, ketama), 200,000 keys over 3 members. Needs the build and bench/node_modules.`,
  options: {},
})
const conditions = new RunConditions()
const { HashRing } = await import('../dist/src/shard/ring/ring.js')
const { default: HashRingPkg } = await import('hashring')
const members = ['127.0.0.1:9001', '127.0.0.1:9002', '127.0.0.1:9003']
const r = new HashRing(members)
const h = new HashRingPkg(members, 'md5', { 'max cache size': 1 })
const keys = Array.from({ length: 200000 }, (_, i) => `8:api.prod` + 'user-' + i * 7919)
for (const [name, f] of [
  ['ours', (k) => r.owner(k)],
  ['hashring', (k) => h.get(k)],
]) {
  for (let rep = 0; rep < 2; rep++) {
    const s = performance.now()
    let x = 0
    for (const k of keys) x += f(k).length
    console.log(name, (((performance.now() - s) / keys.length) * 1000).toFixed(3), 'us/lookup')
  }
}
const counts = {}
for (const k of keys) {
  const o = r.owner(k)
  counts[o] = (counts[o] || 0) + 1
}
console.log(counts)
conditions.print()

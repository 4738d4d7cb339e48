// The per-record cost of replication on both sides, in-process on a build's own modules
// (issue 39): the owner's send (the change log taken, each state looked up, encoded and turned
// into ages) and the replica's receive (decoded, checked, put on the clock, stored), in µs per
// record, for batches of --batch records. With --baseline DIR, another checkout's build is
// measured in the same run, rounds interleaved. No sockets: what a call's frame, tag and
// syscalls cost is bench/peer-path.mjs's.
//
//   npm run build && node bench/replication-records.mjs [--batch 64] [--rounds 2000] [--baseline DIR]
import path from 'node:path'
import { RunConditions } from './lib/conditions.mjs'
import { benchOptions } from './lib/options.mjs'

const { values: args } = benchOptions(import.meta.url, {
  about: `The per-record cost of replication, in-process: the owner's send and the replica's receive of
REPLICATE batches, µs per record; with --baseline DIR another build in the same run. Needs the build.`,
  options: {
    batch: { type: 'number', min: 1, default: 64, help: 'records per REPLICATE batch' },
    rounds: { type: 'number', min: 1, default: 2000, help: 'batches per build and per run' },
    runs: { type: 'number', min: 1, default: 3, help: 'interleaved runs (medians)' },
    baseline: { type: 'string', arg: 'DIR', defaultText: 'none', help: 'another checkout whose build (DIR/dist) is measured in the same run' },
  },
})
const conditions = new RunConditions()
const here = path.dirname(new URL(import.meta.url).pathname)
const T0 = Date.now()

async function harness(dist) {
  const { Replicator } = await import(path.join(dist, 'src/shard/cluster/movement/replicator.js'))
  const { StateTable } = await import(path.join(dist, 'src/shard/table/state-table.js'))
  const { HashRing } = await import(path.join(dist, 'src/shard/ring/ring.js'))
  const { stateKeyOf, ringKeyOf } = await import(path.join(dist, 'src/shard/ring/state-key.js'))
  const { newStep } = await import(path.join(dist, 'src/algorithms/index.js'))
  const { fixedWindow } = await import(path.join(dist, 'src/algorithms/fixed-window.js'))
  const ring = new HashRing(['a', 'b'])
  const metrics = { sent() {}, replicated() {}, dropped() {}, promoted() {} }
  const logger = { info() {}, warn() {}, error() {}, debug() {} }
  let payload
  const client = { state: 'up', call: (_m, p) => ((payload = Buffer.from(p)), Promise.resolve(Buffer.alloc(0))) }
  const side = (self) => {
    const owned = new StateTable(1e6, T0)
    const replicaTable = new StateTable(1e6, T0, Infinity, { resettable: false })
    const pool = { ring, self, client: () => client }
    const r = new Replicator({ replicas: 2, delayMs: 1000, pool, owned, replicaTable, logger, metrics })
    return { r, owned, replicaTable }
  }
  const owner = side('a')
  const replica = side('b')
  owner.r.start()
  // Keys the owner "a" owns, so its replica is "b"; ~60-byte keys like a tenant's.
  const keys = []
  for (let i = 0; keys.length < args.batch * 16; i++) {
    const rk = ringKeyOf('tenant-42.api', `user-${i.toString(36).padStart(8, '0')}-0123456789abcdef`)
    if (ring.owner(rk) === 'a') keys.push(stateKeyOf(fixedWindow.code, 60, rk))
  }
  const out = newStep()
  let k = 0
  return {
    /** One batch: decide `batch` keys, then time the owner's flush and the replica's receive. */
    async round() {
      const now = Date.now()
      for (let i = 0; i < args.batch; i++) owner.owned.decide(keys[k++ % keys.length], fixedWindow, 1e9, 60_000, now, out)
      // CPU time, not wall time: on a shared machine a batch is often preempted mid-way.
      const t0 = process.cpuUsage()
      owner.r.flush()
      const t1 = process.cpuUsage()
      replica.r.receive(payload, 'a', now)
      const t2 = process.cpuUsage()
      // The call's answer settles in a later microtask: until then the link holds the next batch back (PIPELINE).
      await new Promise((resolve) => setImmediate(resolve))
      if (payload.length > args.batch * 200) throw new Error(`a batch of ${payload.length} bytes: the calls did not settle`)
      const us = (x, y) => y.user + y.system - x.user - x.system
      return [us(t0, t1), us(t1, t2)]
    },
  }
}

const builds = [{ label: 'this build', dist: path.join(here, '../dist') }]
if (args.baseline !== undefined) builds.push({ label: `baseline ${args.baseline}`, dist: path.join(path.resolve(args.baseline), 'dist') })
for (const b of builds) b.h = await harness(b.dist)
const results = new Map(builds.map((b) => [b.label, { send: [], receive: [] }]))
const cpu0 = process.cpuUsage()
const wall0 = performance.now()
for (let run = 0; run <= args.runs; run++) {
  for (const b of builds) {
    let send = 0
    let receive = 0
    for (let i = 0; i < args.rounds; i++) {
      const [s, r] = await b.h.round()
      send += s
      receive += r
    }
    // Run 0 warms the JIT up.
    if (run === 0) continue
    const per = args.rounds * args.batch
    results.get(b.label).send.push(send / per)
    results.get(b.label).receive.push(receive / per)
  }
}
const cpu = process.cpuUsage(cpu0)
conditions.add('replication records', (cpu.user + cpu.system) / 1e6, (performance.now() - wall0) / 1000, 1)
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]
const first = results.get(builds[0].label)
console.log(`\nreplication per record — ${args.batch} records a batch, ${args.rounds} batches a run, median of ${args.runs} interleaved runs\n`)
console.log('| build | owner: send µs/record | replica: receive µs/record |')
console.log('|:--|--:|--:|')
for (const b of builds) {
  const m = results.get(b.label)
  const ratio = (k) => (b === builds[0] ? '' : ` (this build ${(median(first[k]) / median(m[k])).toFixed(2)}×)`)
  console.log(`| ${b.label} | ${median(m.send).toFixed(3)}${ratio('send')} | ${median(m.receive).toFixed(3)}${ratio('receive')} |`)
}
conditions.print()

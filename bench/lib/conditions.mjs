// What a bench ran under, printed with its figures: the machine's load average when it began
// and when it ended, and how much of a core each server under test got while it was measured.
// A server that got less than half a core was not kept busy (a busy machine, or a load
// generator that could not keep up): its CPU per request is higher than on a quiet machine,
// since each event-loop wake-up then serves fewer requests (bench/README.md), and its
// latencies measure queueing for the CPU. Those rows are named in a warning.
import { cpus, loadavg } from 'node:os'

export const MIN_CORE_SHARE = 0.5

const fmt = (l) => l.map((x) => x.toFixed(2)).join(' ')

export class RunConditions {
  constructor() {
    this.before = loadavg()
    this.rows = new Map() // label -> { cpuSec, serverSec }
  }

  /** The servers of `label` used `cpuSec` of CPU time (from /proc) in `wallSec`, shared by `servers` processes. */
  add(label, cpuSec, wallSec, servers) {
    if (!(wallSec > 0) || !(servers > 0) || !Number.isFinite(cpuSec)) return
    const row = this.rows.get(label) ?? { cpuSec: 0, serverSec: 0 }
    row.cpuSec += cpuSec
    row.serverSec += wallSec * servers
    this.rows.set(label, row)
  }

  /** label -> cores per server, over every measurement added under that label. */
  shares() {
    return Object.fromEntries([...this.rows].map(([label, r]) => [label, r.cpuSec / r.serverSec]))
  }

  /** The rows whose servers got less than half a core each. */
  starved() {
    return Object.entries(this.shares()).filter(([, share]) => share < MIN_CORE_SHARE)
  }

  /** For a results file: the load averages and each row's share. */
  json() {
    return { cpus: cpus().length, loadavgBefore: this.before, loadavgAfter: loadavg(), coresPerServer: this.shares(), minCoreShare: MIN_CORE_SHARE }
  }

  /** The lines to print with the results. */
  lines() {
    const out = [`load average (1, 5, 15 min) on ${cpus().length} cpus: ${fmt(this.before)} at the start, ${fmt(loadavg())} at the end`]
    const shares = Object.values(this.shares())
    if (shares.length === 0) return out
    const [lo, hi] = [Math.min(...shares).toFixed(2), Math.max(...shares).toFixed(2)]
    out.push(`servers' CPU while measured: ${lo === hi ? lo : `${lo}–${hi}`} of a core each (/proc utime+stime ÷ wall time × servers)`)
    for (const [label, share] of this.starved())
      out.push(
        `warning: ${label}: the servers got ${share.toFixed(2)} of a core each, less than ${MIN_CORE_SHARE}: the machine was busy or the load generator was the limit; its CPU per request reads high and its latencies include waiting for a CPU`,
      )
    return out
  }

  print(write = (s) => process.stdout.write(s)) {
    write(this.lines().join('\n') + '\n')
  }
}

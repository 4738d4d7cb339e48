// Server cost from /proc: CPU time (utime + stime, fields 14 and 15 of
// /proc/<pid>/stat, in clock ticks) and memory (VmRSS, VmHWM of /proc/<pid>/status).
// A "server" is a process group: the leader plus anything it forked.
import { readFileSync, readdirSync } from 'node:fs'
import { execFileSync } from 'node:child_process'

let ticks
export function clockTicks() {
  if (ticks === undefined) {
    try {
      ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
    } catch {
      ticks = 100
    }
  }
  return ticks
}

function parseStat(text) {
  // Field 2 (comm) is in parentheses and may contain spaces: split after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ')
  // rest[0] is field 3 (state); field n is rest[n - 3].
  return { pgrp: Number(rest[5 - 3]), utime: Number(rest[14 - 3]), stime: Number(rest[15 - 3]) }
}

/** pids whose process group is one of pgids. */
export function groupMembers(pgids) {
  const want = new Set(pgids)
  const out = []
  for (const name of readdirSync('/proc')) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue
    try {
      const st = parseStat(readFileSync(`/proc/${name}/stat`, 'utf8'))
      if (want.has(st.pgrp)) out.push(Number(name))
    } catch {
      /* exited meanwhile */
    }
  }
  return out
}

/** CPU ticks used so far by one pid (0 if gone). */
export function cpuTicks(pid) {
  try {
    const st = parseStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))
    return st.utime + st.stime
  } catch {
    return 0
  }
}

/** { rssKb, hwmKb } of one pid (zeros if gone). */
export function memKb(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8')
    const rss = /VmRSS:\s+(\d+)/.exec(text)
    const hwm = /VmHWM:\s+(\d+)/.exec(text)
    return { rssKb: rss ? Number(rss[1]) : 0, hwmKb: hwm ? Number(hwm[1]) : 0 }
  } catch {
    return { rssKb: 0, hwmKb: 0 }
  }
}

/**
 * Watches the process groups of one row. cpu() sums ticks over every member,
 * keeping the last value seen for a pid so that nothing already counted is lost.
 * Samples RSS (sum over members) while running, for the peak.
 */
export class GroupWatch {
  constructor(pgids) {
    this.pgids = pgids
    this.pids = groupMembers(pgids)
    this.lastTicks = new Map()
    this.peakRssKb = 0
    this.timer = null
  }

  refresh() {
    this.pids = groupMembers(this.pgids)
  }

  cpuTicks() {
    for (const pid of this.pids) {
      const t = cpuTicks(pid)
      if (t > 0 || !this.lastTicks.has(pid)) this.lastTicks.set(pid, t)
    }
    let sum = 0
    for (const t of this.lastTicks.values()) sum += t
    return sum
  }

  rssKb() {
    let sum = 0
    for (const pid of this.pids) sum += memKb(pid).rssKb
    return sum
  }

  /** Sum over members of each one's own peak (VmHWM). */
  hwmKb() {
    let sum = 0
    for (const pid of this.pids) sum += memKb(pid).hwmKb
    return sum
  }

  startSampling(everyMs = 500) {
    const tick = () => {
      const r = this.rssKb()
      if (r > this.peakRssKb) this.peakRssKb = r
    }
    tick()
    this.timer = setInterval(tick, everyMs)
    this.timer.unref()
  }

  stopSampling() {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    const r = this.rssKb()
    if (r > this.peakRssKb) this.peakRssKb = r
    return this.peakRssKb
  }
}

/**
 * CPU time of a process in ns, every thread (V8's GC helpers, libuv's pool) included: the
 * first field of /proc/<pid>/task/<tid>/schedstat. /proc/<pid>/stat counts 10 ms ticks, too
 * coarse for idle or per-decision figures.
 */
export function cpuNs(pid) {
  let ns = 0
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0])
    } catch {
      /* thread gone */
    }
  }
  return ns
}

/**
 * The group's RSS once it stops falling: read every 500 ms until four readings in a row are
 * within 1 % of the lowest (at most `maxMs`). Read at once after a load, RSS still holds the
 * garbage of that load and a young generation grown to it (up to 48 MiB a node, which V8's
 * memory reducer gives back after a few idle seconds): a reading 1.5 s after a fill moved by a
 * factor of two between runs of one build (305 and 544 B per key, 2026-11-26).
 */
export async function settledRss(pgids, maxMs = 20_000) {
  const watch = new GroupWatch(pgids)
  const t0 = performance.now()
  let lowest = Infinity
  let steady = 0
  for (;;) {
    watch.refresh()
    const rss = watch.rssKb() * 1024
    steady = rss < lowest * 0.99 ? 0 : steady + 1
    lowest = Math.min(lowest, rss)
    if (steady >= 4 || performance.now() - t0 > maxMs) return lowest
    await new Promise((res) => setTimeout(res, 500))
  }
}

// Medians, ratios and the printed table.

export function median(xs) {
  const v = xs.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b)
  if (v.length === 0) return null
  const m = v.length >> 1
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2
}

/** Summary of N runs of one (scenario, loader): medians of each figure, sums of failures. */
export function summarise(runs) {
  const pick = (f) => median(runs.map(f))
  const sum = (f) => runs.reduce((s, r) => s + (f(r) || 0), 0)
  const total = sum((r) => r.completed)
  return {
    runs: runs.length,
    rps: pick((r) => r.rps),
    cpuUsPerReq: pick((r) => r.cpuUsPerReq),
    cpuUsPerReqMin: Math.min(...runs.map((r) => r.cpuUsPerReq ?? Infinity)),
    cpuUsPerReqMax: Math.max(...runs.map((r) => r.cpuUsPerReq ?? -Infinity)),
    serverCores: pick((r) => r.serverCores),
    p50Ms: pick((r) => r.latencyUs.p50 / 1000),
    p99Ms: pick((r) => r.latencyUs.p99 / 1000),
    p999Ms: pick((r) => r.latencyUs.p999 / 1000),
    completed: total,
    blockedShare: total ? sum((r) => r.status['429']) / total : null,
    errors: sum((r) => r.errors),
    timeouts: sum((r) => r.timeouts),
    otherStatus: sum((r) => r.otherStatus),
    forwardedShare: pick((r) => r.forwardedShare),
    degraded: runs.some((r) => r.degraded != null) ? sum((r) => r.degraded) : null,
    peakRssMb: Math.max(...runs.map((r) => r.peakRssMb ?? 0)),
  }
}

const fmt = {
  int: (x) => (x == null ? '–' : Math.round(x).toLocaleString('en-US')),
  num: (d) => (x) => (x == null ? '–' : x.toFixed(d)),
  pct: (x) => (x == null ? '–' : (x * 100).toFixed(x > 0 && x < 0.01 ? 2 : 0) + '%'),
  ratio: (x) => (x == null ? '–' : x.toFixed(2) + '×'),
}

const COLUMNS = [
  ['scenario', (r) => r.name, 'l'],
  ['req/s', (r) => fmt.int(r.s.rps)],
  ['p50 ms', (r) => fmt.num(2)(r.s.p50Ms)],
  ['p99 ms', (r) => fmt.num(2)(r.s.p99Ms)],
  ['p99.9 ms', (r) => fmt.num(2)(r.s.p999Ms)],
  ['429', (r) => fmt.pct(r.s.blockedShare)],
  ['err', (r) => fmt.int(r.s.errors)],
  ['other st.', (r) => fmt.int(r.s.otherStatus)],
  ['degraded', (r) => (r.s.degraded == null ? '–' : fmt.int(r.s.degraded))],
  ['fwd', (r) => fmt.pct(r.s.forwardedShare)],
  ['CPU µs/req', (r) => fmt.num(1)(r.s.cpuUsPerReq)],
  // half the range of the runs, relative to the median: how far to trust the digit
  ['±', (r) => (r.s.runs > 1 && r.s.cpuUsPerReq ? '±' + ((50 * (r.s.cpuUsPerReqMax - r.s.cpuUsPerReqMin)) / r.s.cpuUsPerReq).toFixed(0) + '%' : '–')],
  ['×floor', (r) => fmt.ratio(r.vsFloor)],
  ['×rl-local', (r) => fmt.ratio(r.vsLocal)],
  ['×1-node', (r) => fmt.ratio(r.vsOneNode)],
  ['srv cores', (r) => fmt.num(2)(r.s.serverCores)],
  ['peak RSS MB', (r) => fmt.int(r.s.peakRssMb)],
]

/** rows: [{ name, s: summary, vsFloor, vsLocal, vsOneNode }] → aligned text table. */
export function table(rows) {
  const cells = rows.map((r) => COLUMNS.map(([, f]) => String(f(r))))
  const heads = COLUMNS.map(([h]) => h)
  const widths = heads.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)))
  const line = (c) => c.map((x, i) => (COLUMNS[i][2] === 'l' ? x.padEnd(widths[i]) : x.padStart(widths[i]))).join('  ')
  return [line(heads), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n')
}

/** Markdown version of the same table (for README). */
export function markdown(rows) {
  const heads = COLUMNS.map(([h]) => h)
  const out = ['| ' + heads.join(' | ') + ' |', '|' + COLUMNS.map(([, , a]) => (a === 'l' ? ':--' : '--:')).join('|') + '|']
  for (const r of rows) out.push('| ' + COLUMNS.map(([, f]) => String(f(r))).join(' | ') + ' |')
  return out.join('\n')
}

/**
 * Each cluster's CPU per decision over its own one node's, grouped by limit so that ours and
 * gubernator's on the same keys stand on one line: the comparison issue 39 asks for, read
 * from one table (one loader, one run set). → lines (none when no row names a oneNode).
 */
export function clusterRatios(rows) {
  const byLimit = new Map()
  for (const r of rows) {
    if (r.vsOneNode == null) continue
    const limit = r.scenario.body.limit
    if (!byLimit.has(limit)) byLimit.set(limit, [])
    byLimit.get(limit).push(`${r.name} ÷ ${r.scenario.oneNode} = ${fmt.ratio(r.vsOneNode)}`)
  }
  if (byLimit.size === 0) return []
  const lines = ['cluster ÷ its own one node, CPU µs per decision (same run):']
  for (const [limit, parts] of byLimit) lines.push(`  limit ${limit.toLocaleString('en-US')}: ${parts.join('   ')}`)
  return lines
}

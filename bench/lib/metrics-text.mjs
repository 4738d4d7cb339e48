// What bench/run.mjs reads of ringlimit's /metrics: named metrics summed over their label sets.
// Pure, so test/bench/lib/metrics-text.test.ts holds it to what the rows print.

/**
 * Outcomes of ringlimit_forwarded_total that were never sent to another node: "shared" is a
 * non-owner's answer from its share (docs/shares.md), counted under the metric for its
 * dashboards. Counting it made the bench's `fwd` column read 67 % whatever shares did.
 */
const NOT_SENT = 'outcome="shared"'

/** Add each metric of `names` found in the Prometheus text `text` into `sums` (summed over labels); returns `sums`. */
export function sumMetrics(text, names, sums = {}) {
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$/.exec(line)
    if (!m || !names.includes(m[1])) continue
    if (m[1] === 'ringlimit_forwarded_total' && (m[2] ?? '').includes(NOT_SENT)) continue
    sums[m[1]] = (sums[m[1]] ?? 0) + Number(m[3])
  }
  return sums
}

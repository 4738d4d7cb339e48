// A small log-linear latency histogram in microseconds: exact below 1024 µs, then
// 512 sub-buckets per power of two (≤ 0.2 % error). autocannon's own histogram
// records whole milliseconds, too coarse for sub-millisecond p50/p99.
const SUB = 512
const EXACT = 1024
const SIZE = EXACT + 32 * SUB

export class Histogram {
  constructor() {
    this.counts = new Float64Array(SIZE)
    this.total = 0
    this.max = 0
  }

  record(us) {
    let v = Math.round(us)
    if (v < 0) v = 0
    if (v > this.max) this.max = v
    this.total++
    if (v < EXACT) {
      this.counts[v]++
      return
    }
    const s = 31 - Math.clz32(v) - 9 // v >>> s lies in [512, 1024)
    const i = EXACT + (s - 1) * SUB + ((v >>> s) - SUB)
    this.counts[i < SIZE ? i : SIZE - 1]++
  }

  add(other) {
    for (let i = 0; i < SIZE; i++) this.counts[i] += other.counts[i]
    this.total += other.total
    if (other.max > this.max) this.max = other.max
  }

  static valueAt(i) {
    if (i < EXACT) return i
    const s = Math.floor((i - EXACT) / SUB) + 1
    const m = ((i - EXACT) % SUB) + SUB
    return (m << s) + ((1 << s) - 1) / 2 // bucket middle
  }

  /** p in [0, 100] → microseconds. */
  percentile(p) {
    if (this.total === 0) return null
    const rank = Math.ceil((p / 100) * this.total)
    let seen = 0
    for (let i = 0; i < SIZE; i++) {
      seen += this.counts[i]
      if (seen >= rank && this.counts[i] > 0) return Math.min(Histogram.valueAt(i), this.max)
    }
    return this.max
  }

  /** Sparse, for postMessage / JSON. */
  toSparse() {
    const idx = []
    const cnt = []
    for (let i = 0; i < SIZE; i++)
      if (this.counts[i] !== 0) {
        idx.push(i)
        cnt.push(this.counts[i])
      }
    return { idx, cnt, total: this.total, max: this.max }
  }

  static fromSparse({ idx, cnt, total, max }) {
    const h = new Histogram()
    for (let k = 0; k < idx.length; k++) h.counts[idx[k]] = cnt[k]
    h.total = total
    h.max = max
    return h
  }
}

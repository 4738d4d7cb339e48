import { Counter, Gauge, type Registry } from "prom-client";

/*
 * Metrics whose values live elsewhere (plain numbers and typed arrays the hot path bumps,
 * or a source asked when scraped) and are read into prom-client only when /metrics is
 * rendered: a prom-client inc() per event would build a label key string every time.
 */

/** A counter read from `total()` at each scrape (a running total kept elsewhere). */
export function pulledCounter(registry: Registry, name: string, help: string, total: () => number): void {
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(total());
    },
  });
}

/** A counter with one label whose totals are `counts[i]` for `values[i]`; every value is exported, 0 included. */
export function pulledLabelledCounter(registry: Registry, name: string, help: string, label: string, values: readonly string[], counts: Float64Array): void {
  new Counter({
    name,
    help,
    labelNames: [label],
    registers: [registry],
    collect() {
      this.reset();
      values.forEach((value, i) => this.inc({ [label]: value }, counts[i]!));
    },
  });
}

/** A gauge set from `value()` at each scrape. */
export function pulledGauge(registry: Registry, name: string, help: string, value: () => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(value());
    },
  });
}

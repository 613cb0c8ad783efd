// Series whose value lives elsewhere (a stats block, a cache, a table) and is
// read when /metrics is scraped: nothing is counted on the hot path, and the
// exposition always shows the source's value at that moment.

import client from 'prom-client';

/** A gauge set to `read()` at every scrape. */
export function scrapedGauge(registry: client.Registry, name: string, help: string, read: () => number): client.Gauge {
  return new client.Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

/** A counter that mirrors a running total kept by its source: `read()` at every scrape. */
export function scrapedCounter(registry: client.Registry, name: string, help: string, read: () => number): client.Counter {
  return new client.Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

export interface MetricValue {
  value: number;
  labels?: Record<string, string | number>;
  metricName?: string;
}

/** A metric whose values are computed at scrape time. */
export class ComputedMetric {
  readonly aggregator = 'sum';
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge' | 'histogram',
    readonly collect: () => MetricValue[],
  ) {}
  get(): { name: string; help: string; type: string; aggregator: string; values: MetricValue[] } {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.collect() };
  }
  reset(): void {}
}

/** Histogram series (cumulative buckets, sum, count) from non-cumulative bucket counts. */
export function histogramValues(name: string, bounds: readonly number[], bucket: (i: number) => number, sum: number): MetricValue[] {
  const values: MetricValue[] = [];
  let cumulative = 0;
  for (let i = 0; i <= bounds.length; i++) {
    cumulative += bucket(i);
    values.push({
      value: cumulative,
      labels: { le: i < bounds.length ? String(bounds[i]) : '+Inf' },
      metricName: `${name}_bucket`,
    });
  }
  values.push({ value: sum, metricName: `${name}_sum` });
  values.push({ value: cumulative, metricName: `${name}_count` });
  return values;
}

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

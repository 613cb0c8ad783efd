// `server.metricsListen`: /metrics on its own address, apart from the OTLP
// ports. Its series name tenants and indexes (the compactor's counters per
// namespace and table, siglake_tenant_* of declared tenants), so on the
// OTLP/HTTP port any caller, without credentials, could read which other
// tenants write and how much. With this set the OTLP/HTTP port answers 404
// to /metrics and only what can reach this address (a Prometheus on a
// private network, the pod's own port) reads them, as the OpenTelemetry
// Collector serves its own telemetry on a port of its own.

import http from 'node:http';
import type { Logger } from '../log.js';
import type { Registry } from 'prom-client';

export class MetricsListener {
  readonly #server: http.Server;
  readonly #host: string;
  readonly #port: number;
  #bound = 0;

  constructor(o: { host: string; port: number; registry: Registry; log: Logger }) {
    this.#host = o.host;
    this.#port = o.port;
    this.#server = http.createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (path !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
        return;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { 'content-type': 'text/plain', allow: 'GET, HEAD' }).end('use GET\n');
        return;
      }
      o.registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': o.registry.contentType }).end(text);
        },
        (err: unknown) => {
          o.log.error({ err: (err as Error).message }, 'metrics collection failed');
          res.writeHead(500).end();
        },
      );
    });
    // A scraper's keep-alive connection must not hold the process's stop.
    this.#server.keepAliveTimeout = 5_000;
  }

  get port(): number {
    return this.#bound;
  }

  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (e: Error) => reject(new Error(`cannot listen on ${this.#host}:${this.#port} for /metrics (server.metricsListen): ${e.message}`));
      this.#server.once('error', onError);
      this.#server.listen(this.#port, this.#host, () => {
        this.#server.off('error', onError);
        const a = this.#server.address();
        this.#bound = typeof a === 'object' && a !== null ? a.port : this.#port;
        resolve(this.#bound);
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }
}

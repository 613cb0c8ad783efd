// A TCP port nothing listens on at the moment of asking, on 127.0.0.1: for
// peers (PostgreSQL, Redis, SeaweedFS, the Collector) that must be told their
// port before they start. Another process may take it before the peer binds;
// the peers' start-up waits report that plainly.

import net from 'node:net';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

// A TCP proxy to 127.0.0.1:<target> that delays every client→server chunk by
// `delayMs` (in order): a Redis that many milliseconds away, for tests of
// what a round trip costs.

import net from 'node:net';

export interface DelayProxy {
  readonly port: number;
  close(): void;
}

export async function delayProxy(target: number, delayMs: number): Promise<DelayProxy> {
  const socks = new Set<net.Socket>();
  const server = net.createServer((c) => {
    const s = net.connect(target, '127.0.0.1');
    socks.add(c);
    socks.add(s);
    c.on('data', (d) => setTimeout(() => s.write(d), delayMs));
    s.on('data', (d) => c.write(d));
    c.on('close', () => s.destroy());
    s.on('close', () => c.destroy());
    c.on('error', () => undefined);
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      for (const s of socks) s.destroy();
      server.close();
    },
  };
}

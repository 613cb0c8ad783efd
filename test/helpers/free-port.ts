// A TCP port nothing listens on at the moment of asking, on 127.0.0.1: for
// peers (PostgreSQL, Redis, SeaweedFS, the Collector) that must be told their
// port before they start. Another process may take it before the peer binds;
// the peers' start-up waits report that plainly.

import { readFileSync } from 'node:fs';
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

/** Whether `port` on 127.0.0.1 can be listened on now (then it is released again). */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** The kernel's ephemeral port range (Linux), else the usual default. */
function ephemeralRange(): [number, number] {
  try {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(lo) && Number.isInteger(hi)) return [lo!, hi!];
  } catch {
    // Not Linux: assume the default.
  }
  return [32768, 60999];
}

/**
 * A free port below the kernel's ephemeral range, for a peer that is killed
 * and started again on the same port: the kernel never hands such a port out
 * by itself (neither listen(0) nor the local end of an outgoing connection),
 * so while the peer is down only a process that names that very port could
 * take it. Falls back to freePort() where the range leaves no room below it.
 */
export async function freeFixedPort(): Promise<number> {
  const LOW = 10_000;
  const high = ephemeralRange()[0] - 1;
  if (high - LOW < 1000) return freePort();
  for (let i = 0; i < 50; i++) {
    const port = LOW + Math.floor(Math.random() * (high - LOW + 1));
    if (await canListen(port)) return port;
  }
  return freePort();
}

// Processes and ports for the native-bench scripts (run.mjs, otelcol-peer.mjs,
// servers/*.mjs): plain Node, no build step, like report.mjs.

import net from 'node:net';

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** SIGTERM, then SIGKILL after 15 s; resolves when the child has exited. */
export async function stopChild(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(t);
}

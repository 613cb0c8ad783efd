#!/usr/bin/env node
// The ceiling: uWebSockets.js (its native binary, loaded as src/ingest/uws-loader.ts
// does) reading the whole body and answering 200 with an empty body. Nothing
// that parses HTTP in Node answers faster. Prints {"port":N} once listening.
//
//   node uws-discard.mjs [PORT] [THREADS]
//
// THREADS > 1 (the second-acceptor experiment of docs/performance.md): the
// main thread listens first (on PORT, or a free port), then THREADS - 1
// worker_threads each run their own uWS app listening on that same port; uWS
// sets SO_REUSEPORT, so the kernel spreads new connections over the threads.
// uSockets sets SO_REUSEPORT only when the port is not 0, so with PORT 0 a
// free port is found first (bound and closed by node:net) and every thread
// listens on it by number.

import { createRequire } from 'node:module';
import path from 'node:path';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { freePort } from '../proc.mjs';

const require = createRequire(import.meta.url);
const pkgDir = path.dirname(require.resolve('uWebSockets.js/package.json'));
const uws = require(path.join(pkgDir, 'binaries', `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`));

function serve(port, onListening) {
  const app = uws.App();
  app.post('/*', (res) => {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    let bytes = 0;
    res.onData((chunk, isLast) => {
      bytes += chunk.byteLength;
      if (isLast && !aborted) res.cork(() => res.writeHeader('Content-Type', 'application/x-protobuf').end(bytes >= 0 ? '' : 'x'));
    });
  });
  app.any('/*', (res) => res.cork(() => res.writeStatus('404 Not Found').end()));
  app.listen('127.0.0.1', port, (socket) => {
    if (!socket) {
      console.error('cannot listen');
      process.exit(1);
    }
    onListening(uws.us_socket_local_port(socket));
  });
}

if (isMainThread) {
  const threads = Math.max(1, Number(process.argv[3] ?? 1));
  let first = Number(process.argv[2] ?? 0);
  if (threads > 1 && first === 0) first = await freePort();
  serve(first, (port) => {
    let waiting = threads - 1;
    if (waiting === 0) console.log(JSON.stringify({ port, threads }));
    for (let t = 1; t < threads; t++) {
      const w = new Worker(new URL(import.meta.url), { workerData: { port } });
      let listening = false;
      w.once('message', () => {
        listening = true;
        if (--waiting === 0) console.log(JSON.stringify({ port, threads }));
      });
      // process.exit() in a worker ends only that thread: a thread that could not listen ends the server.
      w.once('exit', (code) => {
        if (!listening) {
          console.error(`acceptor thread ${t} exited (${code}) before listening on ${port}`);
          process.exit(1);
        }
      });
      w.once('error', (e) => {
        console.error(`acceptor thread failed: ${e.message}`);
        process.exit(1);
      });
    }
  });
  process.on('SIGTERM', () => process.exit(0));
} else {
  serve(workerData.port, () => parentPort.postMessage('listening'));
}


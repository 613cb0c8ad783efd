#!/usr/bin/env node
// The ceiling: uWebSockets.js (its native binary, loaded as src/ingest/uws-loader.ts
// does) reading the whole body and answering 200 with an empty body. Nothing
// that parses HTTP in Node answers faster. Prints {"port":N} once listening.

import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const pkgDir = path.dirname(require.resolve('uWebSockets.js/package.json'));
const uws = require(path.join(pkgDir, 'binaries', `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`));
const port = Number(process.argv[2] ?? 0);

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
  console.log(JSON.stringify({ port: uws.us_socket_local_port(socket) }));
});
process.on('SIGTERM', () => process.exit(0));

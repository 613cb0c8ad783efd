#!/usr/bin/env node
// For reference beside grpc-js: a bare node:http2 handler that reads the whole
// gRPC request and answers an empty message with grpc-status 0. What HTTP/2 in
// Node allows before grpc-js adds its own cost. Prints {"port":N}.

import http2 from 'node:http2';

const EMPTY_FRAME = Buffer.alloc(5);
const server = http2.createServer({ settings: { maxConcurrentStreams: 1000 } });
server.on('stream', (stream) => {
  stream.on('data', () => {});
  stream.on('end', () => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.end(EMPTY_FRAME);
  });
  stream.on('error', () => {});
});
server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })));
process.on('SIGTERM', () => process.exit(0));

#!/usr/bin/env node
// The baseline: what a Node user would write first, written plainly and not
// sabotaged. node:http; the body collected; decoded with protobufjs (the OTLP
// protos of proto/); appended to one file with a length prefix; fdatasync once
// per batch of the requests that arrived while the previous sync ran (group
// commit, as any durable writer must); then every request of the batch is
// answered 200 with an empty Export*ServiceResponse.
//
//   node node-http-baseline.mjs PORT FILE      prints {"port":N} once listening

import http from 'node:http';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const protoDir = path.join(here, '..', '..', 'proto');
const root = new protobuf.Root();
root.resolvePath = (_o, target) => (path.isAbsolute(target) ? target : path.join(protoDir, target));
root.loadSync(['opentelemetry/proto/collector/logs/v1/logs_service.proto', 'opentelemetry/proto/collector/trace/v1/trace_service.proto']);
const types = {
  '/v1/logs': root.lookupType('opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest'),
  '/v1/traces': root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest'),
};

const port = Number(process.argv[2] ?? 0);
const file = await open(process.argv[3] ?? path.join(here, 'baseline.log'), 'a');
let pending = [];
let flushing = false;

async function flush() {
  flushing = true;
  while (pending.length > 0) {
    const batch = pending;
    pending = [];
    const buffers = [];
    for (const { body } of batch) {
      const len = Buffer.alloc(4);
      len.writeUInt32LE(body.length);
      buffers.push(len, body);
    }
    let status = 200;
    try {
      await file.writev(buffers);
      await file.datasync();
    } catch {
      status = 500;
    }
    for (const { res } of batch) {
      res.writeHead(status, { 'Content-Type': 'application/x-protobuf' });
      res.end();
    }
  }
  flushing = false;
}

const server = http.createServer((req, res) => {
  const type = types[req.url];
  if (req.method !== 'POST' || type === undefined) {
    res.writeHead(404);
    res.end();
    return;
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    try {
      type.decode(body);
    } catch (e) {
      res.writeHead(400, { 'Content-Type': 'text/plain' });
      res.end(String(e.message));
      return;
    }
    pending.push({ body, res });
    if (!flushing) flush();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })));
process.on('SIGTERM', () => process.exit(0));

#!/usr/bin/env node
// The gRPC ceiling: a @grpc/grpc-js server with identity serializers that
// takes the OTLP Export message and answers an empty response, doing nothing
// else. Prints {"port":N} once listening.

import * as grpc from '@grpc/grpc-js';

const identity = (b) => b;
const EMPTY = Buffer.alloc(0);
const method = (path) => ({ path, requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity });
const server = new grpc.Server({ 'grpc.max_receive_message_length': 64 << 20 });
const handler = (call, callback) => callback(null, call.request.length >= 0 ? EMPTY : EMPTY);
server.addService({ Export: method('/opentelemetry.proto.collector.logs.v1.LogsService/Export') }, { Export: handler });
server.addService({ Export: method('/opentelemetry.proto.collector.trace.v1.TraceService/Export') }, { Export: handler });
server.bindAsync(`127.0.0.1:${Number(process.argv[2] ?? 0)}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    console.error(err.message);
    process.exit(1);
  }
  console.log(JSON.stringify({ port }));
});
process.on('SIGTERM', () => process.exit(0));

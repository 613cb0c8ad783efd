// The Piscina task "serve shard k": one long-running task per worker thread
// that ends only at shutdown. If the thread dies, the task's promise rejects
// in the acceptor's dispatcher (src/shard/dispatcher.ts), which refuses the
// shard's in-flight requests (SIGLAKE_WORKER_DIED) and runs this task again on
// a new thread.

import { threadId } from 'node:worker_threads';
import { ShardLoop } from './shard-loop.js';
import type { ShardExit, ShardTaskArgs } from '../shard/protocol.js';

export default function serveShard(args: ShardTaskArgs): Promise<ShardExit> {
  return new ShardLoop(args, threadId).run();
}

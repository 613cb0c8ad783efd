// Rendezvous (highest random weight) hashing: a tenant goes to the shard whose
// hash of (tenant, shard) is highest. Every coordinator with the same shard
// list picks the same shard, and removing a shard moves only its tenants.

import { createHash } from 'node:crypto';

function weight(tenant: string, shard: string): bigint {
  return createHash('sha256').update(tenant).update('\0').update(shard).digest().readBigUInt64BE(0);
}

/** The shard of `tenant` among `shards` (non-empty). Ties (never in practice) go to the first listed. */
export function pickShard(tenant: string, shards: readonly string[]): string {
  let best = shards[0]!;
  let bestWeight = -1n;
  for (const s of shards) {
    const w = weight(tenant, s);
    if (w > bestWeight) {
      best = s;
      bestWeight = w;
    }
  }
  return best;
}

// LaneKey: the one name of a lane. The invariant that matters: the key the
// acceptor gives a lane and the key a (restarted) worker derives from the
// lane's directory on disk are the same, so they pick the same shard and no
// two workers ever open the same files.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LaneTable } from '../../src/lanes/lane-table.js';
import { LaneKey } from '../../src/shard/lane-key.js';
import { listLaneDirs } from '../../src/wal/layout.js';

describe('LaneKey', () => {
  it('derives every spelling from one key', () => {
    const idx = LaneKey.of('acme', 'traces', 'audit');
    expect([idx.key, idx.label, idx.progressKey, idx.index]).toEqual(['acme/i:audit', 'acme/indexes/audit', 'index.audit', 'audit']);
    expect([idx.icebergTable('logs'), idx.icebergTable('traces')]).toEqual(['audit', 'traces']);
    expect(idx.walDir('/w')).toBe(path.join('/w', 'acme', 'indexes', 'audit'));
    const logs = LaneKey.of('default', 'logs', undefined);
    expect([logs.key, logs.label, logs.progressKey, logs.index, logs.icebergTable('logs')]).toEqual([
      'default/logs',
      'default/logs',
      'logs',
      undefined,
      'logs',
    ]);
    // The default tenant's lanes sit at the WAL root (contract §7).
    expect(logs.walDir('/w')).toBe(path.join('/w', 'logs'));
    // An index named like a default table is its own lane.
    expect(LaneKey.of('a', 'logs', 'logs').key).not.toBe(LaneKey.of('a', 'logs', undefined).key);
  });

  it("a worker finds on disk exactly the key (and shard) the acceptor's lane table gave each lane", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-lanekey-'));
    try {
      const workers = 3;
      const table = new LaneTable(100, workers);
      const lanes = [
        table.create('default', 'logs', undefined),
        table.create('default', 'traces', undefined),
        table.create('acme', 'logs', undefined),
        table.create('acme', 'traces', 'web'),
        table.create('acme', 'logs', 'audit'),
        table.create('globex', 'traces', undefined),
      ];
      for (const l of lanes) fs.mkdirSync(l.key.walDir(root), { recursive: true });
      const fromDisk = listLaneDirs(root).map((loc) => {
        const k = LaneKey.at(loc);
        expect(k.walDir(root)).toBe(loc.dir);
        return `${k.key}@${k.shard(workers)}`;
      });
      expect(fromDisk.sort()).toEqual(lanes.map((l) => `${l.key.key}@${l.shard}`).sort());
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

// Where the query engine opens a table's data files: DuckDB reads local
// paths (its httpfs extension, which could read s3:// itself, is neither
// installed nor loaded here: extensions stay off in a tenant context).
//
//   local warehouse (FileStorage): the data file itself, nothing copied.
//   s3:// warehouse: a copy in the bounded ObjectCache under query.cacheDir,
//   pinned while a context is being built and while a query runs, so the
//   least recently used copies can go once no query needs them.
//
// A cached copy's path depends only on its location, so a copy evicted
// between two queries comes back at the same path: the context's
// allowed_paths stay right.

import { FileStorage } from '../iceberg/file-storage.js';
import { ObjectCache, type CacheStats } from '../iceberg/object-cache.js';
import type { ObjectStorage } from '../iceberg/storage.js';

export interface LocalFilesLease {
  /** Location → local path, for every location asked. */
  readonly paths: ReadonlyMap<string, string>;
  release(): Promise<void>;
}

export interface LocalFiles {
  /** Local paths of these locations, kept on disk until release(). */
  acquire(locations: readonly string[]): Promise<LocalFilesLease>;
  /** The cache's counters (all zero for a local warehouse: nothing is copied). */
  readonly stats: CacheStats;
}

const NO_STATS: CacheStats = { hits: 0, misses: 0, evictions: 0, bytes: 0, files: 0 };

export async function openLocalFiles(storage: ObjectStorage, cache: { dir: string; maxMib: number }): Promise<LocalFiles> {
  if (storage instanceof FileStorage) {
    // Nothing to pin. The paths are worked out only when asked for (building a
    // context), not on each query's lease: a URL parse per data file per query
    // was a measurable share of a short query on a table of many files.
    const release = () => Promise.resolve();
    return {
      acquire: (locations) => {
        let paths: Map<string, string> | undefined;
        return Promise.resolve({
          get paths() {
            if (paths === undefined) {
              paths = new Map<string, string>();
              for (const loc of locations) paths.set(loc, storage.pathOf(loc));
            }
            return paths;
          },
          release,
        });
      },
      stats: NO_STATS,
    };
  }
  return ObjectCache.open({ storage, dir: cache.dir, maxBytes: cache.maxMib * 1024 * 1024 });
}

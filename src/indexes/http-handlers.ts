// The index API (contract §3, §6) as plain functions of (request, tenant):
// no transport here, so the query server mounts them on its own listener and
// tests call them directly. The tenant is the caller's verified identity,
// resolved (and admitted) by whoever mounts the handlers; nothing in a
// request body or path can name another tenant.
//
//   GET    /api/v1/indexes          200 {"indexes": [...]}
//   GET    /api/v1/indexes/{name}   200 {index}        | 404 SIGLAKE_UNKNOWN_INDEX
//   PUT    /api/v1/indexes/{name}   201 created, 200 updated | 400 SIGLAKE_BAD_INDEX | 409
//   DELETE /api/v1/indexes/{name}   204                | 404
//
// Bodies of refusals: {"error": {"code": "SIGLAKE_…", "message": "…"}}.

import { IcebergError } from '../iceberg/iceberg-error.js';
import { IndexError } from './index-error.js';
import { parseIndexText, validateIndexSpec } from './index-spec.js';
import { unknownIndex, type IndexInfo, type IndexRegistry } from './registry.js';

export interface IndexHttpRequest {
  readonly method: string;
  /** The path without the query string. */
  readonly path: string;
  readonly body?: Uint8Array | string;
}

export interface IndexHttpResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** JSON text; empty for 204. */
  readonly body: string;
}

export const INDEX_API_PREFIX = '/api/v1/indexes';
/** Largest PUT body taken (a definition of 200 mapped columns is well under it). */
export const MAX_INDEX_BODY_BYTES = 256 * 1024;

/** Whether a path belongs to the index API (so a server can route it here). */
export function isIndexApiPath(path: string): boolean {
  return path === INDEX_API_PREFIX || path.startsWith(`${INDEX_API_PREFIX}/`);
}

/** The public JSON of an index (no warehouse location: that is the operator's). */
export function indexJson(i: IndexInfo): Record<string, unknown> {
  return {
    name: i.name,
    retentionDays: i.retentionDays,
    mapping: i.mapping.map((c) => ({ column: c.column, from: c.from, type: c.type, fieldId: c.id })),
    registered: i.registered,
  };
}

/** An index the API changed (the audit stream's `index_change`: declared-tenants.md §4). */
export interface IndexChange {
  readonly action: 'created' | 'updated' | 'deleted';
  readonly index: string;
}

/**
 * `subset`: the tenant's declared indexes (declared-tenants.md §3); an index
 * outside it is not listed and reads as one that does not exist (404), and
 * creating one is refused (403 SIGLAKE_INDEX_NOT_IN_TENANT, as on ingest).
 * Undefined: all of the tenant's indexes. `onChange`: called once the
 * registry made a change (a PUT that created or updated, a DELETE), before
 * the answer is returned.
 */
export async function handleIndexRequest(
  req: IndexHttpRequest,
  tenant: string,
  registry: IndexRegistry,
  subset?: ReadonlySet<string>,
  onChange?: (change: IndexChange) => void,
): Promise<IndexHttpResponse> {
  try {
    if (req.path === INDEX_API_PREFIX || req.path === `${INDEX_API_PREFIX}/`) {
      if (req.method !== 'GET') return notAllowed('GET, HEAD');
      const list = await registry.list(tenant);
      return json(200, { indexes: list.filter((i) => subset === undefined || subset.has(i.name)).map(indexJson) });
    }
    if (!req.path.startsWith(`${INDEX_API_PREFIX}/`)) return refuse(404, 'SIGLAKE_NOT_FOUND', 'no such endpoint');
    const rest = req.path.slice(INDEX_API_PREFIX.length + 1);
    let name: string;
    try {
      name = decodeURIComponent(rest);
    } catch {
      return refuse(404, 'SIGLAKE_UNKNOWN_INDEX', 'no such index in this tenant');
    }
    if (name.includes('/')) return refuse(404, 'SIGLAKE_NOT_FOUND', 'no such endpoint');
    if (subset !== undefined && !subset.has(name)) {
      if (req.method === 'PUT') return refuse(403, 'SIGLAKE_INDEX_NOT_IN_TENANT', `index ${name} is not among this tenant's declared indexes`);
      if (req.method === 'GET' || req.method === 'DELETE') throw unknownIndex(name);
    }
    switch (req.method) {
      case 'GET':
        return json(200, indexJson(await registry.show(tenant, name)));
      case 'DELETE':
        await registry.delete(tenant, name);
        onChange?.({ action: 'deleted', index: name });
        return { status: 204, headers: {}, body: '' };
      case 'PUT': {
        const body = req.body ?? '';
        const size = typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
        if (size > MAX_INDEX_BODY_BYTES) return refuse(413, 'SIGLAKE_BODY_TOO_LARGE', `index definition over ${MAX_INDEX_BODY_BYTES} bytes`);
        const text = typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
        const spec = validateIndexSpec(parseIndexText(text), name);
        const r = await registry.put(tenant, spec);
        // A definition equal to the one in force changed nothing: no event (an idempotent PUT).
        if (r.changed) onChange?.({ action: r.created ? 'created' : 'updated', index: r.info.name });
        return json(r.created ? 201 : 200, indexJson(r.info));
      }
      default:
        return notAllowed('GET, HEAD, PUT, DELETE');
    }
  } catch (e) {
    if (e instanceof IndexError) return refuse(e.status, e.code, e.message);
    if (e instanceof IcebergError && e.code === 'SIGLAKE_ICEBERG_COMMIT_RETRIES') {
      const r = refuse(503, 'SIGLAKE_UNAVAILABLE', 'the index is being changed by another writer; retry');
      return { ...r, headers: { ...r.headers, 'retry-after': '1' } }; // as every 503 of the query server
    }
    // Catalog or warehouse failure: no internals (paths, SQL) in the answer.
    return refuse(500, 'SIGLAKE_INDEX_REGISTRY', 'the index registry (catalog or warehouse) failed');
  }
}

function json(status: number, value: unknown): IndexHttpResponse {
  return { status, headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) };
}

function refuse(status: number, code: string, message: string): IndexHttpResponse {
  return json(status, { error: { code, message } });
}

function notAllowed(allow: string): IndexHttpResponse {
  return { ...refuse(405, 'SIGLAKE_METHOD_NOT_ALLOWED', `method not allowed (${allow})`), headers: { 'content-type': 'application/json', allow } };
}

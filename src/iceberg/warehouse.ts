// Opens the warehouse that `warehouse.path` names: a local directory
// (FileStorage, `file:///…` locations) or `s3://bucket/prefix` (S3Storage,
// `s3://…` locations, configured by warehouse.s3.*).

import { FileStorage } from './file-storage.js';
import type { ObjectStorage } from './storage.js';

/** The warehouse settings (a plain object: it crosses to the compactor thread). */
export interface WarehouseSettings {
  readonly warehousePath: string;
  readonly warehouseS3Endpoint?: string | undefined;
  readonly warehouseS3Region?: string | undefined;
  readonly warehouseS3ForcePathStyle?: boolean | undefined;
}

export function isS3Warehouse(path: string): boolean {
  return path.startsWith('s3://');
}

/** Opens (for S3: probes access and conditional-write support) the warehouse. */
export async function openWarehouse(s: WarehouseSettings): Promise<ObjectStorage> {
  if (!isS3Warehouse(s.warehousePath)) return new FileStorage(s.warehousePath);
  // Loaded only for an S3 warehouse: the SDK is large, and a local warehouse needs none of it.
  const { S3Storage } = await import('./s3-storage.js');
  return S3Storage.open({
    uri: s.warehousePath,
    endpoint: s.warehouseS3Endpoint,
    region: s.warehouseS3Region,
    forcePathStyle: s.warehouseS3ForcePathStyle,
  });
}

/** Releases what an opened warehouse holds (the S3 client's sockets). */
export function closeWarehouse(storage: ObjectStorage): void {
  const closable = storage as ObjectStorage & { close?: () => void };
  if (typeof closable.close === 'function') closable.close();
}

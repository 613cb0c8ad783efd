// The tenants file's parse off the event loop (tenants-reloader.ts): the
// reloader's thread parses and validates each text it is handed and posts
// back the declarations (plain objects, Maps and Sets: structured clone keeps
// them) or the TenantsFileError's message and detail. YAML parsing costs
// about 0.5 ms per tenant once warm, several times that cold (a 10,000-tenant
// file about 5 s): on the main thread it held every ingest request and
// /readyz for as long.

import { parentPort } from 'node:worker_threads';
import { parseTenantsText, TenantsFileError } from './tenants-file.js';

export interface ParseRequest {
  readonly text: string;
  readonly name: string;
}

export type ParseReply =
  | { readonly decls: ReturnType<typeof parseTenantsText> }
  | { readonly error: { readonly message: string; readonly detail: string; readonly file: boolean } };

parentPort?.on('message', ({ text, name }: ParseRequest) => {
  let reply: ParseReply;
  try {
    reply = { decls: parseTenantsText(text, name) };
  } catch (e) {
    const err = e as Error;
    reply = { error: { message: err.message, detail: e instanceof TenantsFileError ? e.detail : err.message, file: e instanceof TenantsFileError } };
  }
  parentPort!.postMessage(reply);
});

// `siglake index`: a tenant's indexes, offline, straight against the catalog
// and the warehouse (contract §1, §6; docs/indexes.md).
//
//   siglake index create --file F [--tenant T] [flags]
//   siglake index update --file F [--tenant T] [flags]
//   siglake index list            [--tenant T] [flags]
//   siglake index show NAME       [--tenant T] [flags]
//   siglake index delete NAME     [--tenant T] [flags]
//
// F is the YAML or JSON of an index definition (`-`: standard input).
// --tenant defaults to `default` (namespace `main`). Every other flag is a
// setting (--catalog-url, --catalog-name, --warehouse, --config …).
// list and show print JSON on standard output.
//
// Exit codes: 0 done; 1 refused (the code and message on standard error) or
// the catalog/warehouse failed; 2 bad usage (a --tenant that breaks the
// identifier rule among it: nothing is opened or made) or a bad setting.
// A NAME that breaks the rule is no usage error: no index has it, so show
// and delete refuse it SIGLAKE_UNKNOWN_INDEX (exit 1), as the index API does (404).
//
// With audit.file set, create, update and delete each append an
// `index_change` event (declared-tenants.md §4: every index change), with
// reason `index_command` and no subject or peer (an offline command has no
// verified principal). The file is opened before the change (after the
// arguments and the definition were checked): one that cannot be opened
// refuses the command (exit 2) and changes nothing; a command refused after
// it was opened removes it again if it made it (one that was there keeps its bytes).

import fs from 'node:fs';
import { loadCommandSettings, withSource } from '../config/load.js';
import { ConfigError } from '../errors.js';
import { closeWarehouse, openWarehouse } from '../iceberg/warehouse.js';
import { missingSqliteCatalog, SqlCatalog } from '../iceberg/sql-catalog.js';
import { DEFAULT_TENANT, isValidIdentifier } from '../tenancy/identifier.js';
import { indexChangeEvent, openAuditLog, type AuditLog } from '../tenants/audit-log.js';
import { indexJson } from './http-handlers.js';
import { IndexError } from './index-error.js';
import { parseIndexText, validateIndexSpec, type IndexSpec } from './index-spec.js';
import { IndexRegistry } from './registry.js';

const USAGE = `usage: siglake index create|update --file F | list | show NAME | delete NAME  [--tenant T] [settings flags]`;

export async function runIndexCommand(argv: string[]): Promise<number> {
  const sub = argv[0];
  if (sub === undefined || !['create', 'update', 'list', 'show', 'delete'].includes(sub)) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  let tenant = DEFAULT_TENANT;
  let file: string | undefined;
  const positional: string[] = [];
  const rest: string[] = [];
  // NAME comes right after show/delete, so a boolean settings flag cannot swallow it.
  let first = 1;
  if ((sub === 'show' || sub === 'delete') && argv[1] !== undefined && !argv[1].startsWith('--')) {
    positional.push(argv[1]);
    first = 2;
  }
  for (let i = first; i < argv.length; i++) {
    const a = argv[i]!;
    const eq = a.indexOf('=');
    const key = a.startsWith('--') && eq > 0 ? a.slice(0, eq) : a;
    const inline = a.startsWith('--') && eq > 0 ? a.slice(eq + 1) : undefined;
    if (key === '--tenant' || key === '--file') {
      const v = inline ?? argv[++i];
      if (v === undefined) {
        process.stderr.write(`siglake: ${key} needs a value\n${USAGE}\n`);
        return 2;
      }
      if (key === '--tenant') tenant = v;
      else file = v;
    } else if (a.startsWith('--')) {
      rest.push(a);
      // A settings flag's value, when it is the next word.
      if (inline === undefined && i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) rest.push(argv[++i]!);
    } else positional.push(a);
  }
  const needsName = sub === 'show' || sub === 'delete';
  const needsFile = sub === 'create' || sub === 'update';
  if ((needsName && positional.length !== 1) || (!needsName && positional.length !== 0) || needsFile !== (file !== undefined)) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  // A tenant that breaks the identifier rule is bad usage, refused before anything is opened or
  // made (it went to the registry and came back a refusal, SIGLAKE_BAD_INDEX, exit 1, after an
  // SQLite catalog, the warehouse and the audit file were made).
  if (!isValidIdentifier(tenant)) {
    process.stderr.write(`siglake: --tenant: ${JSON.stringify(tenant)} is not a tenant identifier (1-128 of A-Z a-z 0-9 _ -, not a reserved name)\n`);
    return 2;
  }
  const loaded = loadCommandSettings(rest, { command: 'index' });
  if (loaded === undefined) return 2;
  const settings = loaded.settings;
  // Only create may make the catalog; list, show, update and delete of one that is not there would
  // make an empty one (in the wrong directory, say) and answer from it.
  const missing = sub === 'create' ? null : missingSqliteCatalog(settings.catalogUrl);
  if (missing !== null) {
    process.stderr.write(`siglake: ${missing}\n`);
    return 2;
  }
  // The definition is read and checked before anything is opened: a file that cannot be read
  // (exit 2) or a definition refused (exit 1) left an empty audit file behind.
  let spec: IndexSpec | undefined;
  if (needsFile) {
    let text: string;
    try {
      text = fs.readFileSync(file === '-' ? 0 : file!, 'utf8');
    } catch (e) {
      process.stderr.write(`siglake: cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}\n`);
      return 2;
    }
    try {
      spec = validateIndexSpec(parseIndexText(text));
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      process.stderr.write(`siglake: ${typeof code === 'string' ? `${code}: ` : ''}${(e as Error).message}\n`);
      return 1;
    }
  }
  let audit: AuditLog | undefined;
  if (settings.auditFile !== undefined && (sub === 'create' || sub === 'update' || sub === 'delete')) {
    try {
      audit = openAuditLog(settings.auditFile);
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      process.stderr.write(`siglake: ${withSource(e, loaded)}\n`);
      return 2;
    }
  }
  const catalog = SqlCatalog.open(settings.catalogUrl, settings.catalogName);
  // A local directory or an s3:// bucket (warehouse.path), as the compactor opens it.
  const storage = await openWarehouse(settings).catch(async (e: unknown) => {
    await catalog.close();
    if (audit !== undefined && !audit.discardIfCreated()) await audit.close();
    throw e;
  });
  const registry = new IndexRegistry({ catalog, storage, ...crashHook() });
  // A refused command removes the audit file it made and wrote nothing to (one that was there keeps its bytes).
  let done = false;
  try {
    switch (sub) {
      case 'list':
        out({ indexes: (await registry.list(tenant)).map(indexJson) });
        break;
      case 'show':
        out(indexJson(await registry.show(tenant, positional[0]!)));
        break;
      case 'delete':
        await registry.delete(tenant, positional[0]!);
        done = true;
        audit?.write(indexChangeEvent(tenant, positional[0]!, 'deleted', 'index_command', null, null));
        break;
      default: {
        const info = sub === 'create' ? { ...(await registry.create(tenant, spec!)), changed: true } : await registry.update(tenant, spec!);
        done = true;
        if (info.changed) audit?.write(indexChangeEvent(tenant, info.name, sub === 'create' ? 'created' : 'updated', 'index_command', null, null));
        out(indexJson(info));
      }
    }
    return 0;
  } catch (e) {
    if (e instanceof IndexError) {
      process.stderr.write(`siglake: ${e.code}: ${e.message}\n`);
      return 1;
    }
    const code = (e as { code?: unknown }).code;
    process.stderr.write(`siglake: ${typeof code === 'string' ? `${code}: ` : ''}${(e as Error).message}\n`);
    return 1;
  } finally {
    closeWarehouse(storage);
    await catalog.close();
    if (audit !== undefined && (done || !audit.discardIfCreated())) await audit.close();
  }
}

function out(v: unknown): void {
  process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
}

/**
 * Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_CRASH_INDEX_CREATE=1 kills the
 * process with SIGKILL after a create wrote the table's metadata file and
 * before the catalog row exists: the window a crash-safe create must survive.
 */
function crashHook(): { afterCreateMetadata?: () => void } {
  if (process.env['SIGLAKE_TEST_HOOKS'] !== '1' || process.env['SIGLAKE_TEST_CRASH_INDEX_CREATE'] !== '1') return {};
  return { afterCreateMetadata: () => process.kill(process.pid, 'SIGKILL') };
}

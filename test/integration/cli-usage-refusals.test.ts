// Bad arguments of the offline commands and the query server's start are
// usage or settings refusals: exit 2, one line on standard error naming the
// flag, and nothing made (no catalog, warehouse or audit file), against the
// real `siglake` executable.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, listFiles, runCli, tempDir } from '../helpers/ingester.js';
import { icebergFlags } from '../helpers/query.js';

function oneLine(stderr: string): string {
  const lines = stderr.split('\n').filter((l) => l !== '');
  expect(lines, `stderr: ${stderr}`).toHaveLength(1);
  return lines[0]!;
}

describe('siglake index --tenant that breaks the identifier rule', () => {
  // It went to the registry and came back SIGLAKE_BAD_INDEX with exit 1 (a refusal), after the
  // SQLite catalog, the warehouse and the audit file had been made; the command promises exit 2
  // for bad usage, as every other subcommand does for a bad argument.
  const subcommands = (def: string): string[][] => [['create', '--file', def], ['update', '--file', def], ['list'], ['show', 'payments'], ['delete', 'payments']];

  it('create in a fresh directory: exit 2, one line naming --tenant, nothing made', () => {
    const dir = tempDir('siglake-index-tenant-fresh-');
    const def = path.join(dir, 'payments.yaml');
    fs.writeFileSync(def, 'name: payments\n');
    for (const tenant of ['bad name', '', '../x', 'logs']) {
      const r = runCli(['index', 'create', '--file', def, '--tenant', tenant, ...icebergFlags(dir), '--audit-file', path.join(dir, 'audit.jsonl')], { cwd: dir });
      expect(r.status, `${JSON.stringify(tenant)}: ${r.stderr}`).toBe(2);
      expect(oneLine(r.stderr)).toBe(`siglake: --tenant: ${JSON.stringify(tenant)} is not a tenant identifier (1-128 of A-Z a-z 0-9 _ -, not a reserved name)`);
      expect(fs.readdirSync(dir)).toEqual(['payments.yaml']);
    }
  });

  it('every subcommand on an existing catalog: exit 2, one line naming --tenant, nothing changed or made', () => {
    const dir = tempDir('siglake-index-tenant-');
    const def = path.join(dir, 'payments.yaml');
    fs.writeFileSync(def, 'name: payments\n');
    const made = runCli(['index', 'create', '--file', def, '--tenant', 'acme', ...icebergFlags(dir)], { cwd: dir });
    expect(made.status, made.stderr).toBe(0);
    const before = listFiles(dir);
    const catalogBytes = fs.readFileSync(path.join(dir, 'catalog.db'));
    for (const args of subcommands(def)) {
      for (const tenant of ['bad name', '']) {
        for (const form of [['--tenant', tenant], [`--tenant=${tenant}`]]) {
          const r = runCli(['index', ...args, ...form, ...icebergFlags(dir), '--audit-file', path.join(dir, 'audit.jsonl')], { cwd: dir });
          const what = `${args.join(' ')} ${form.join(' ')}`;
          expect(r.status, `${what}: ${r.stderr}`).toBe(2);
          expect(oneLine(r.stderr), what).toContain(`--tenant: ${JSON.stringify(tenant)} is not a tenant identifier`);
          expect(r.stdout, what).toBe('');
        }
      }
    }
    expect(listFiles(dir)).toEqual(before);
    expect(fs.readFileSync(path.join(dir, 'catalog.db')).equals(catalogBytes)).toBe(true);
    // The index is still there, for its own tenant.
    expect(JSON.parse(runCli(['index', 'show', 'payments', '--tenant', 'acme', ...icebergFlags(dir)], { cwd: dir }).stdout).name).toBe('payments');
  });
});

describe('siglake query --query-listen with a host that does not resolve', () => {
  it('exit 2, one line naming query.listen, the host and the reason; no catalog, warehouse or audit file', () => {
    // (.invalid never resolves, RFC 6761; a resolver that cannot reach its server says EAI_AGAIN instead.)
    const dir = tempDir('siglake-query-listen-');
    const r = spawnSync(process.execPath, [CLI, 'query', '--query-listen', 'nosuch.invalid:0', ...icebergFlags(dir), '--audit-file', path.join(dir, 'audit.jsonl')], {
      encoding: 'utf8',
      cwd: dir,
      timeout: 20_000,
    });
    expect(r.status, r.stderr).toBe(2);
    expect(oneLine(r.stderr)).toMatch(/^siglake: invalid query\.listen \(flag --query-listen\): host nosuch\.invalid does not resolve \((ENOTFOUND|EAI_AGAIN)\)$/);
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});

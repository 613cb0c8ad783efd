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

describe('a refused siglake index command leaves no audit file behind', () => {
  // The audit file was made before the definition was read: a --file that cannot be read (exit 2),
  // a definition refused (exit 1) or a refused change (an unknown index, one that exists) left an
  // empty audit file behind.
  it('exit 1 or 2 as before; no audit file made; one that was there keeps its bytes', () => {
    const dir = tempDir('siglake-index-audit-');
    const def = path.join(dir, 'payments.yaml');
    fs.writeFileSync(def, 'name: payments\n');
    const bad = path.join(dir, 'bad.yaml');
    fs.writeFileSync(bad, 'name: logs\n');
    expect(runCli(['index', 'create', '--file', def, '--tenant', 'acme', ...icebergFlags(dir)], { cwd: dir }).status).toBe(0);
    const cases: [string[], number, string][] = [
      [['create', '--file', path.join(dir, 'nonexistent.yaml')], 2, 'cannot read'],
      [['create', '--file', bad], 1, 'SIGLAKE_BAD_INDEX'],
      [['create', '--file', def], 1, 'SIGLAKE_INDEX_EXISTS'],
      [['delete', 'nosuch'], 1, 'SIGLAKE_UNKNOWN_INDEX'],
    ];
    const audit = path.join(dir, 'audit.jsonl');
    for (const [args, status, want] of cases) {
      const r = runCli(['index', ...args, '--tenant', 'acme', ...icebergFlags(dir), '--audit-file', audit], { cwd: dir });
      expect(r.status, `${args.join(' ')}: ${r.stderr}`).toBe(status);
      expect(oneLine(r.stderr)).toContain(want);
      expect(fs.existsSync(audit), args.join(' ')).toBe(false);
    }
    const before = '{"event":"index_change","tenant":"acme"}\n';
    fs.writeFileSync(audit, before);
    for (const [args, status] of cases) {
      expect(runCli(['index', ...args, '--tenant', 'acme', ...icebergFlags(dir), '--audit-file', audit], { cwd: dir }).status).toBe(status);
      expect(fs.readFileSync(audit, 'utf8')).toBe(before);
    }
    // A change that is made is audited, after what was there.
    expect(runCli(['index', 'delete', 'payments', '--tenant', 'acme', ...icebergFlags(dir), '--audit-file', audit], { cwd: dir }).status).toBe(0);
    const lines = fs.readFileSync(audit, 'utf8').split('\n').filter((l) => l !== '');
    expect(lines[0]).toBe(before.trim());
    expect(JSON.parse(lines[1]!)).toMatchObject({ event: 'index_change', tenant: 'acme', index: 'payments', action: 'deleted' });
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

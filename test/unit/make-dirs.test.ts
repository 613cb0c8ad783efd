// `mkdir -p` that always ends (src/make-dirs.ts): Node's recursive mkdir never
// returns for a path under /proc.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeDirs, makeDirsSync } from '../../src/make-dirs.js';

const errno = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    return (e as NodeJS.ErrnoException).code;
  }
  return undefined;
};

describe('makeDirsSync / makeDirs', () => {
  it('make every missing directory, and accept one that exists', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-make-dirs-'));
    makeDirsSync(path.join(root, 'a', 'b', 'c'));
    expect(fs.statSync(path.join(root, 'a', 'b', 'c')).isDirectory()).toBe(true);
    makeDirsSync(path.join(root, 'a', 'b', 'c'));
    await makeDirs(path.join(root, 'x', 'y'));
    await makeDirs(path.join(root, 'x', 'y'));
    expect(fs.statSync(path.join(root, 'x', 'y')).isDirectory()).toBe(true);
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('throw what mkdir says for a path under /proc (ENOENT), a file in the way (ENOTDIR) or a file at the path (EEXIST)', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-make-dirs-'));
    fs.writeFileSync(path.join(root, 'f'), '');
    expect(errno(() => makeDirsSync(`/proc/siglake-make-dirs-${process.pid}/a/b`))).toBe('ENOENT');
    await expect(makeDirs(`/proc/siglake-make-dirs-${process.pid}/a`)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(errno(() => makeDirsSync(path.join(root, 'f', 'sub')))).toBe('ENOTDIR');
    await expect(makeDirs(path.join(root, 'f', 'sub'))).rejects.toMatchObject({ code: 'ENOTDIR' });
    expect(errno(() => makeDirsSync(path.join(root, 'f')))).toBe('EEXIST');
    await expect(makeDirs(path.join(root, 'f'))).rejects.toMatchObject({ code: 'EEXIST' });
    fs.rmSync(root, { recursive: true, force: true });
  });
});

// Preloaded into a real `siglake` process (NODE_OPTIONS=--require <this file>)
// by tests that bound what it reads: when the process exits, it appends its
// `rchar` from /proc/self/io (every byte its read calls returned, of every
// thread, page cache or not) to the file named by SIGLAKE_TEST_READ_BYTES_FILE.
'use strict';
const fs = require('node:fs');

const file = process.env.SIGLAKE_TEST_READ_BYTES_FILE;
if (file) {
  process.on('exit', () => {
    try {
      const m = /^rchar: (\d+)$/m.exec(fs.readFileSync('/proc/self/io', 'utf8'));
      if (m) fs.appendFileSync(file, `${m[1]}\n`);
    } catch {
      // The test then finds no figure and fails on that.
    }
  });
}

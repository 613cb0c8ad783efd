// Preloaded into a real `siglake` process (NODE_OPTIONS=--require <this file>)
// by tests that bound its memory: when the process (or one of its threads)
// exits, it appends the process's peak resident set, in KiB, to the file
// named by SIGLAKE_TEST_MAX_RSS_FILE. A high-water mark, so no sampling and
// no timing: what the process held at its worst is what the test reads.
'use strict';
const fs = require('node:fs');

const file = process.env.SIGLAKE_TEST_MAX_RSS_FILE;
if (file) {
  process.on('exit', () => {
    try {
      fs.appendFileSync(file, `${process.resourceUsage().maxRSS}\n`);
    } catch {
      // The test then finds no figure and fails on that.
    }
  });
}

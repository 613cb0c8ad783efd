// The reliability suites' seeded PRNG is the project's own (src/prng.ts).
export { Prng } from '../../../src/prng.js';

// The first import of every shard (scripts/test-plan.mjs writes them): holds the shard's tests until all of
// its files have been imported. node:test starts a file's first test as soon as the file declares it, so
// without this a later file's top-level work (loading a tokenizer, making a model, a top-level await) ran
// in the middle of an earlier file's tests and delayed their timers: a 50 ms timeout measured 1.2 s. A
// root-level `before` hook runs before the first test; it waits for the shard's last line, `release()`.
import { before } from 'node:test';

let release;
const imported = new Promise((resolve) => (release = resolve));
before(() => imported);

export { release };

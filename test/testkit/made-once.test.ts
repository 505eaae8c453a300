/**
 * testkit/made-once.ts: a fixture is made once per run directory and copied for each caller; without the
 * run's directory each call makes its own; a failed make leaves nothing behind; when another process's
 * rename wins, its copy is used. The run's own ARBOR_TEST_FIXTURES is restored after each test.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { madeOnce } from '../../testkit/made-once.js';

/** A scratch directory, and ARBOR_TEST_FIXTURES set to `fixtures` (or unset) until the test ends. */
function scratch(t: TestContext, withFixtures: boolean): { root: string; fixtures: string } {
  const root = mkdtempSync(join(tmpdir(), 'arbor-made-once-'));
  const fixtures = join(root, 'fixtures');
  mkdirSync(fixtures);
  const saved = process.env.ARBOR_TEST_FIXTURES;
  if (withFixtures) process.env.ARBOR_TEST_FIXTURES = fixtures;
  else delete process.env.ARBOR_TEST_FIXTURES;
  t.after(() => {
    if (saved === undefined) delete process.env.ARBOR_TEST_FIXTURES;
    else process.env.ARBOR_TEST_FIXTURES = saved;
    rmSync(root, { recursive: true, force: true });
  });
  return { root, fixtures };
}

/** A make that writes `dir`/a.txt with `text` and counts its calls. */
function counting(text: string) {
  const make = (dir: string) => {
    make.calls++;
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'a.txt'), text);
  };
  make.calls = 0;
  return make;
}

test('madeOnce: one make per key in a run, a copy for every caller', (t) => {
  const { root, fixtures } = scratch(t, true);
  const make = counting('one');
  const a = madeOnce('key 1', join(root, 'a'), make);
  const b = madeOnce('key 1', join(root, 'b', 'model'), make);
  assert.equal(make.calls, 1);
  assert.equal(readFileSync(join(a, 'a.txt'), 'utf8'), 'one');
  assert.equal(readFileSync(join(b, 'a.txt'), 'utf8'), 'one');
  // a copy, not a link: a caller that changes its files changes nobody else's
  writeFileSync(join(a, 'a.txt'), 'changed');
  assert.equal(readFileSync(join(madeOnce('key 1', join(root, 'c'), make), 'a.txt'), 'utf8'), 'one');
  const other = counting('two');
  assert.equal(readFileSync(join(madeOnce('key 2', join(root, 'd'), other), 'a.txt'), 'utf8'), 'two');
  assert.equal(other.calls, 1);
  assert.equal(readdirSync(fixtures).length, 2, 'one entry per key, no partial directories');
});

test('madeOnce: without the run directory every call makes its own', (t) => {
  const { root } = scratch(t, false);
  const make = counting('x');
  madeOnce('key', join(root, 'a'), make);
  madeOnce('key', join(root, 'b'), make);
  assert.equal(make.calls, 2);
  assert.ok(existsSync(join(root, 'b', 'a.txt')));
});

test('madeOnce: a failed make throws and leaves nothing; a rename lost to another process uses its copy', (t) => {
  const { root, fixtures } = scratch(t, true);
  assert.throws(
    () =>
      madeOnce('bad', join(root, 'a'), (dir) => {
        mkdirSync(dir);
        throw new Error('make failed');
      }),
    /^Error: make failed$/,
  );
  assert.deepEqual(readdirSync(fixtures), []);
  assert.equal(existsSync(join(root, 'a')), false);
  // while this process makes its part, "another process" finishes the same entry first
  const out = madeOnce('raced', join(root, 'b'), (dir) => {
    mkdirSync(dir);
    writeFileSync(join(dir, 'a.txt'), 'mine');
    const entry = dir.replace(/\.part-\d+$/, '');
    mkdirSync(entry);
    writeFileSync(join(entry, 'a.txt'), 'theirs');
  });
  assert.equal(readFileSync(join(out, 'a.txt'), 'utf8'), 'theirs');
  assert.equal(readdirSync(fixtures).length, 1, 'the losing part was removed');
});

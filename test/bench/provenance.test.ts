/**
 * Every bench JSON's provenance (bench/util.ts): the commit, `dirty` for uncommitted changes to tracked
 * files under src/ or bench/ only, a diff hash that two runs of the same edits share, Node, date and
 * arguments; the JSON keeps them over a bench's own keys and flags code that changed during the run.
 * Runs git in throwaway checkouts (testkit/bench/git-repo.ts); no bench runs.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchRecord, provenance, sameCode, writeBenchJson } from '../../bench/util.js';
import { makeRepo } from '../../testkit/bench/git-repo.js';

const now = new Date('2026-11-27T09:30:00.000Z');

test('a clean checkout: its commit, dirty false, no diff, and the invocation', () => {
  const repo = makeRepo();
  try {
    const p = provenance('replay', ['--variants', 'dots'], { cwd: repo.dir, now });
    assert.deepEqual(p, {
      commit: repo.git('rev-parse', 'HEAD'),
      dirty: false,
      dirty_files: [],
      diff: null,
      node: process.version,
      date: '2026-11-27T09:30:00.000Z',
      bench: 'replay',
      args: ['--variants', 'dots'],
    });
    assert.match(p.commit!, /^[0-9a-f]{40}$/);
  } finally {
    repo.remove();
  }
});

test('dirty only for tracked changes under src/ or bench/, staged or not; the diff hash follows the edits', () => {
  const repo = makeRepo();
  try {
    const at = () => provenance('x', [], { cwd: repo.dir, now });
    repo.write('README.md', '# changed\n');
    repo.write('src/new.ts', 'export const untracked = 1;\n');
    assert.equal(at().dirty, false, 'README.md is outside src/ and bench/; src/new.ts is untracked');
    repo.write('src/a.ts', 'export const a = 10;\n');
    const edited = at();
    assert.equal(edited.dirty, true);
    assert.deepEqual(edited.dirty_files, ['src/a.ts']);
    assert.match(edited.diff!, /^[0-9a-f]{16}$/);
    repo.git('add', 'src/a.ts');
    assert.deepEqual(at().dirty_files, ['src/a.ts'], 'a staged change is still uncommitted');
    assert.equal(at().diff, edited.diff, 'the same edits, staged or not, hash the same');
    repo.write('bench/b.ts', 'export const b = 3;\n');
    const more = at();
    assert.deepEqual(more.dirty_files, ['bench/b.ts', 'src/a.ts']);
    assert.notEqual(more.diff, edited.diff, 'other edits, another hash');
    const before = more.commit;
    const after = repo.commitAll('second');
    assert.deepEqual([at().commit, at().dirty, at().diff], [after, false, null]);
    assert.notEqual(after, before);
  } finally {
    repo.remove();
  }
});

test("the results table's snapshots (bench/results/) are data: editing or deleting one leaves a bench clean", () => {
  const repo = makeRepo();
  try {
    repo.write('bench/results/methods-x.json', '{"headline":{}}\n');
    repo.commitAll('a snapshot');
    const at = () => provenance('x', [], { cwd: repo.dir, now });
    repo.write('bench/results/methods-x.json', '{"headline":{"a":1}}\n');
    assert.equal(at().dirty, false, 'a snapshot rewritten');
    repo.git('rm', '-q', '-f', 'bench/results/methods-x.json');
    assert.equal(at().dirty, false, 'a snapshot deleted');
    repo.write('bench/b.ts', 'export const b = 4;\n');
    assert.deepEqual(at().dirty_files, ['bench/b.ts'], 'the rest of bench/ is still code');
  } finally {
    repo.remove();
  }
});

test('outside a git checkout: commit and dirty are null, not guessed', () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-bench-nogit-'));
  try {
    const p = provenance('x', [], { cwd: dir, now });
    assert.deepEqual([p.commit, p.dirty, p.diff], [null, null, null]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('sameCode: one commit, and both clean or both with the same edits', () => {
  const at = (commit: string | null, dirty: boolean | null, diff: string | null) => ({ commit, dirty, diff });
  assert.equal(sameCode(at('a', false, null), at('a', false, null)), true);
  assert.equal(sameCode(at('a', false, null), at('b', false, null)), false);
  assert.equal(sameCode(at('a', true, 'h1'), at('a', true, 'h1')), true);
  assert.equal(sameCode(at('a', true, 'h1'), at('a', true, 'h2')), false);
  assert.equal(sameCode(at('a', true, 'h1'), at('a', false, null)), false);
  assert.equal(sameCode(at(null, null, null), at(null, null, null)), false, 'no commit is never the same code');
  assert.equal(sameCode(at('a', null, null), at('a', null, null)), false, 'unknown edits are never the same');
});

test("the bench JSON: provenance first and not overridden by a bench's keys; code changed mid-run is flagged", () => {
  const repo = makeRepo();
  const out = mkdtempSync(join(tmpdir(), 'arbor-bench-out-'));
  try {
    const start = provenance('demo', ['--seeds', '1'], { cwd: repo.dir, now });
    const record = benchRecord('demo', { gain: 1.5 }, { commit: 'mine', steps: 3 }, start);
    assert.deepEqual(Object.keys(record).slice(0, 10), [
      'name',
      'commit',
      'dirty',
      'dirty_files',
      'diff',
      'node',
      'date',
      'bench',
      'args',
      'machine',
    ]);
    assert.equal(record.commit, start.commit, "the bench's own `commit` key does not replace the provenance");
    assert.deepEqual([record.steps, record.headline, record.code_changed_during_run], [3, { gain: 1.5 }, undefined]);
    repo.write('src/a.ts', 'export const a = 5;\n');
    const end = provenance('demo', ['--seeds', '1'], { cwd: repo.dir, now });
    const changed = benchRecord('demo', { gain: 1.5 }, {}, start, end);
    assert.equal(changed.code_changed_during_run, true);
    assert.deepEqual(changed.code_at_end, {
      commit: start.commit,
      dirty: true,
      dirty_files: ['src/a.ts'],
      diff: end.diff,
    });
    assert.equal(changed.dirty, false, 'the JSON keeps the state the bench started from');

    // the writer, on this checkout (no beginBench in this process: the provenance is taken at write time)
    const file = writeBenchJson('demo', { gain: 2 }, { steps: 1 }, { dir: out });
    const written = JSON.parse(readFileSync(file, 'utf8'));
    assert.equal(file, join(out, 'demo.json'));
    assert.match(written.commit, /^[0-9a-f]{40}$/);
    assert.equal(typeof written.dirty, 'boolean');
    assert.deepEqual(
      [written.node, written.bench, written.args, written.headline],
      [process.version, 'demo', [], { gain: 2 }],
    );
  } finally {
    repo.remove();
    rmSync(out, { recursive: true, force: true });
  }
});

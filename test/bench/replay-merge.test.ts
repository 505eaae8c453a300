/**
 * The merge rule of `npm run bench -- replay --variants ...` (bench/replay.ts `carryOver`) on fabricated
 * replay.json contents (testkit/bench/replay-json.ts): figures of variants not re-run are kept only when
 * every one was measured at this commit (and with the same uncommitted edits, if any) and the same
 * settings; otherwise a DataError names the file, both commits and the field. No bench runs.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { carryOver } from '../../bench/replay.js';
import { DataError } from '../../src/core/errors.js';
import { COMMIT_A, COMMIT_B, SETTINGS, fakeProvenance, replayJson } from '../../testkit/bench/replay-json.js';

const FILE = 'bench/out/replay.json';

test('same commit and settings: the variants not re-run, their curves and the export are kept, with their runs', () => {
  const kept = carryOver(
    replayJson(COMMIT_A, { date: 'then' }),
    FILE,
    fakeProvenance(COMMIT_A),
    ['replay-dots'],
    SETTINGS,
  );
  assert.deepEqual(Object.keys(kept.variants), ['sequential', 'sequential-8']);
  assert.deepEqual(kept.variants['sequential-8'], { seeds_ok: 3, tokens_to_target: 2000 });
  assert.deepEqual(Object.keys(kept.curves), ['sequential', 'sequential-8']);
  assert.deepEqual(kept.export, { ok: true, rows: 7, detail: 'fabricated' });
  const run = { commit: COMMIT_A, dirty: false, diff: null, date: 'then' };
  assert.deepEqual(kept.runs, { sequential: run, 'sequential-8': run, export: run });
});

test('no previous JSON: nothing is kept', () => {
  assert.deepEqual(carryOver(undefined, FILE, fakeProvenance(COMMIT_A), ['replay-dots'], SETTINGS), {
    variants: {},
    curves: {},
    runs: {},
  });
});

test('another commit: refused, naming the file, both commits and the variant', () => {
  assert.throws(
    () => carryOver(replayJson(COMMIT_B), FILE, fakeProvenance(COMMIT_A), ['replay-dots'], SETTINGS),
    (e: unknown) =>
      e instanceof DataError &&
      e.file === FILE &&
      e.field === 'runs.sequential.commit' &&
      e.message.includes(`"sequential" was measured at ${COMMIT_B}, this run is at ${COMMIT_A}`) &&
      /a headline may not mix commits/.test(e.message),
  );
});

test('one kept variant from another commit (an earlier merge) is enough to refuse', () => {
  const previous = replayJson(COMMIT_A);
  previous.runs['sequential-8'] = { ...previous.runs['sequential-8'], commit: COMMIT_B };
  assert.throws(
    () => carryOver(previous, FILE, fakeProvenance(COMMIT_A), ['replay-dots'], SETTINGS),
    (e: unknown) => e instanceof DataError && e.field === 'runs.sequential-8.commit',
  );
  // re-running that variant replaces it: the rest is from this commit
  const kept = carryOver(previous, FILE, fakeProvenance(COMMIT_A), ['replay-dots', 'sequential-8'], SETTINGS);
  assert.deepEqual(Object.keys(kept.variants), ['sequential']);
});

test('uncommitted edits: merged only with runs of the very same edits', () => {
  const dirty = replayJson(COMMIT_A, { diff: '0123456789abcdef' });
  const same = carryOver(dirty, FILE, fakeProvenance(COMMIT_A, '0123456789abcdef'), ['replay-dots'], SETTINGS);
  assert.deepEqual(Object.keys(same.variants), ['sequential', 'sequential-8']);
  for (const current of [fakeProvenance(COMMIT_A, 'fedcba9876543210'), fakeProvenance(COMMIT_A)]) {
    assert.throws(
      () => carryOver(dirty, FILE, current, ['replay-dots'], SETTINGS),
      (e: unknown) => e instanceof DataError && /uncommitted edits \(diff 0123456789abcdef\)/.test(e.message),
    );
  }
  assert.throws(
    () => carryOver(replayJson(COMMIT_A), FILE, fakeProvenance(COMMIT_A, 'fedcba9876543210'), ['sequential'], SETTINGS),
    (e: unknown) => e instanceof DataError && e.message.includes(`this run is at ${COMMIT_A} + uncommitted edits`),
  );
});

test('a JSON written before runs were recorded, or outside git, is refused', () => {
  const old = replayJson(COMMIT_A);
  delete old.runs;
  assert.throws(
    () => carryOver(old, FILE, fakeProvenance(COMMIT_A), ['replay-dots'], SETTINGS),
    (e: unknown) => e instanceof DataError && /records no commit for "sequential"/.test(e.message),
  );
  assert.throws(
    () => carryOver(replayJson(COMMIT_A), FILE, fakeProvenance(null), ['replay-dots'], SETTINGS),
    (e: unknown) => e instanceof DataError && /this run is at no commit/.test(e.message),
  );
});

test('other settings (steps, seeds, config) are refused too', () => {
  const previous = replayJson(COMMIT_A, { settings: { ...SETTINGS, steps: 20 } });
  assert.throws(
    () => carryOver(previous, FILE, fakeProvenance(COMMIT_A), ['replay-dots'], SETTINGS),
    (e: unknown) => e instanceof DataError && e.field === 'settings' && /"steps":20/.test(e.message),
  );
});

test('re-running every kept variant and sequential (which re-exports): nothing of the old JSON is used', () => {
  const kept = carryOver(
    replayJson(COMMIT_B),
    FILE,
    fakeProvenance(COMMIT_A),
    ['sequential', 'sequential-8', 'replay-dots'],
    SETTINGS,
  );
  assert.deepEqual(kept, { variants: {}, curves: {}, runs: {} });
  // without sequential the old export round trip would be kept, so its commit is checked
  const previous = replayJson(COMMIT_B, { variants: ['sequential-8', 'replay-dots'] });
  assert.throws(
    () => carryOver(previous, FILE, fakeProvenance(COMMIT_A), ['sequential-8', 'replay-dots'], SETTINGS),
    (e: unknown) => e instanceof DataError && e.field === 'runs.export.commit',
  );
});

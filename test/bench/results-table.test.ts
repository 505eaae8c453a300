/**
 * The results table (scripts/results-table.ts): its exact output on fabricated snapshots (a clean, a dirty,
 * a commit-less and a code-changed one; testkit/bench/results-json.ts), the spread and verdict rules at their
 * boundaries, its errors (each names the file and field), `--snapshot`'s copy, and that the committed
 * docs/results.md and the README's table are exactly what the generator writes from the committed
 * bench/results/*.json.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  README,
  README_BEGIN,
  README_END,
  REGISTRY,
  RESULTS_DIR,
  RESULTS_DOC,
  renderReadmeTable,
  spliceReadme,
  SNAPSHOT_FIELDS,
  formatValue,
  readSnapshots,
  renderResults,
  seedStats,
  snapshot,
  verdict,
} from '../../scripts/results-table.js';
import { ConfigError, DataError } from '../../src/core/errors.js';
import { fabricatedSnapshots } from '../../testkit/bench/results-json.js';

const ARITH = 'arith (control-mixed)';

test('fabricated snapshots: one row per registered headline, exact; the rest listed, nothing dropped', () => {
  const out = renderResults(fabricatedSnapshots());
  assert.ok(out.startsWith('# Results: every method against its matched control\n'), out.slice(0, 80));
  const rows = out
    .split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('| Method') && !l.startsWith('| ---'))
    .map((l) => l.slice(2, -2).split(' | '));
  assert.deepEqual(rows, [
    [
      'DARS allocation',
      ARITH,
      'uniform, the rollouts per step DARS trained on',
      '`allocation_matched_tokens_to_target_gain`',
      '1.40× ± 0.20× (3 seeds)',
      'wins',
      '`111111111111`',
      '`bench/results/control.json`',
    ],
    [
      'ReMix replay',
      ARITH,
      'ReMix with replay probability 0 (same 2 updates per batch)',
      '`replay_matched_tokens_to_target_gain`',
      '1.00× ± 0.10× (3 seeds)',
      'within noise',
      '`222222222222` **uncommitted edits**',
      '`bench/results/replay.json`',
    ],
    [
      'LATR',
      ARITH,
      'TreePO (like-for-like siblings)',
      '`latr_distinct_sibling_gain`',
      '1.30× ± ? (no per-seed values)',
      'no spread',
      '**no commit**',
      '`bench/results/latr.json`',
    ],
    [
      'ARRoL pruning (16 paths, calibrated head)',
      ARITH,
      'the same 16 i.i.d. paths per prompt, unpruned',
      '`pruning_final_acc_delta`',
      '-4.0 pts ± 1.0 pts (3 seeds)',
      'loses',
      '`111111111111`',
      '`bench/results/control.json`',
    ],
    [
      'FAPO',
      'scratchpad (3×2 digits)',
      'GRPO on the verifier alone, same rollouts (flawed share of 4 sampled answers per held-out problem)',
      '`fapo_flawed_positive_rate_delta`',
      '-10.0% ± 2.0% (3 seeds)',
      'wins',
      '`111111111111` **code changed during run**',
      '`bench/results/scratchpad.json`',
    ],
    [
      'advantage shaping: entropy',
      ARITH,
      'plain GRPO, same rollouts',
      '`shaping_entropy_tokens_to_target_gain`',
      '1.05× ± ? (1 seed)',
      'no spread',
      '`111111111111`',
      '`bench/results/control.json`',
    ],
  ]);
  const tail = out.slice(out.indexOf('Not measured yet'));
  assert.equal(
    tail,
    [
      'Not measured yet (no snapshot records a value):',
      '',
      '- `treepo_tokens_to_target_gain`: TreePO against i.i.d. GRPO, same rollouts',
      '- `pruning_tokens_saved`: ARRoL pruning (16 paths, calibrated head) against the same 16 i.i.d. paths per prompt, unpruned',
      '- `value_head_auc_at_decision`: ARRoL value head against chance (AUC 0.5), the scores at the pruning round',
      '- `fapo_final_acc_delta`: FAPO against GRPO on the verifier alone, same rollouts (greedy accuracy)',
      '- `contrastive_score_gain`: contrastive prompting against the same prompts without earlier candidates',
      '- `april_throughput_gain`: APRIL partial rollouts against the synchronous batch: same prompts, steps and warm ' +
        'start; finished trajectories per second',
      '- `sapo_tokens_to_target_gain`: SAPO rollout sharing against 2 learners not sharing, equal tokens per learner',
      '',
      'Left out on purpose (they do not measure what they name):',
      '',
      '- `allocation_tokens_to_target_gain` in `bench/results/control.json`: unmatched: DARS samples fewer ' +
        'rollouts per step than uniform; see allocation_matched_tokens_to_target_gain',
      '- `replay_tokens_to_target_gain` in `bench/results/replay.json`: unmatched: ReMix makes 2 updates per ' +
        'batch; see replay_matched_tokens_to_target_gain',
      '',
      'Other headlines, not method-against-control figures:',
      '',
      '- `export_roundtrip` in `bench/results/replay.json`',
      '',
      'Inputs:',
      '',
      '- `bench/results/control.json`: `111111111111`, 2026-11-01T00:00:00.000Z',
      '- `bench/results/latr.json`: **no commit**, no date',
      '- `bench/results/replay.json`: `222222222222` **uncommitted edits**, 2026-11-02T00:00:00.000Z',
      '- `bench/results/scratchpad.json`: `111111111111` **code changed during run**, 2026-11-03T00:00:00.000Z',
      '',
    ].join('\n'),
  );
  // the order of the inputs does not change the output
  assert.equal(renderResults(fabricatedSnapshots().reverse()), out);
});

test('spread: the sample standard deviation; "within noise" when mean ± spread covers the neutral value', () => {
  assert.deepEqual(seedStats([1, 2, 3]), { mean: 2, spread: 1, n: 3 });
  assert.deepEqual(seedStats([1.5]), { mean: 1.5, spread: null, n: 1 });
  const gain = REGISTRY.allocation_matched_tokens_to_target_gain;
  assert.equal(verdict(gain, { mean: 1.25, spread: 0.25 }), 'within noise');
  assert.equal(verdict(gain, { mean: 1.25, spread: 0.24 }), 'wins');
  assert.equal(verdict(gain, { mean: 0.75, spread: 0.24 }), 'loses');
  assert.equal(verdict(gain, { mean: 3, spread: null }), 'no spread');
  // lower is better: a negative flawed-positive delta wins, a positive one loses
  const fapo = REGISTRY.fapo_flawed_positive_rate_delta;
  assert.equal(verdict(fapo, { mean: -0.1, spread: 0.05 }), 'wins');
  assert.equal(verdict(fapo, { mean: 0.1, spread: 0.05 }), 'loses');
  // an AUC is judged against chance
  const auc = REGISTRY.value_head_auc_at_decision;
  assert.equal(verdict(auc, { mean: 0.8, spread: 0.1 }), 'wins');
  assert.equal(verdict(auc, { mean: 0.55, spread: 0.1 }), 'within noise');
  assert.equal(formatValue(auc, 0.8), '0.800');
  assert.equal(formatValue(REGISTRY.pruning_tokens_saved, 0.123), '+12.3%');
});

/** A fresh temporary directory, removed when the test ends. */
function tempDir(t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-results-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('headline not the mean of its seeds, bad seeds, not a bench JSON: a DataError naming file and field', (t) => {
  const [, control] = fabricatedSnapshots();
  const off = { ...control, json: { ...control.json, headline: { allocation_matched_tokens_to_target_gain: 1.5 } } };
  assert.throws(
    () => renderResults([off]),
    (e: unknown) =>
      e instanceof DataError &&
      e.file === 'bench/results/control.json' &&
      e.field === 'headline.allocation_matched_tokens_to_target_gain' &&
      /is not the mean of headline_seeds/.test(e.message),
  );
  const bad = {
    ...control,
    json: { ...control.json, headline_seeds: { allocation_matched_tokens_to_target_gain: [1.2, 'x'] } },
  };
  assert.throws(
    () => renderResults([bad]),
    (e: unknown) => e instanceof DataError && e.field === 'headline_seeds.allocation_matched_tokens_to_target_gain',
  );
  const dir = tempDir(t);
  writeFileSync(join(dir, 'a.json'), '{"name": "x"}');
  assert.throws(
    () => readSnapshots(dir),
    (e: unknown) => e instanceof DataError && e.file === 'bench/results/a.json' && e.field === 'headline',
  );
  writeFileSync(join(dir, 'a.json'), '{');
  assert.throws(
    () => readSnapshots(dir),
    (e: unknown) => e instanceof DataError && /bench\/results\/a\.json is not JSON/.test(e.message),
  );
});

test('--snapshot keeps provenance, headline and per-seed values only; a bench with no JSON is a ConfigError', (t) => {
  const out = tempDir(t);
  const results = join(tempDir(t), 'results');
  const [, control] = fabricatedSnapshots();
  writeFileSync(join(out, 'control.json'), JSON.stringify({ ...control.json, curves: { uniform: [[0, 0.5]] } }));
  const written = snapshot('control', out, results);
  assert.equal(written, join(results, 'control.json'));
  const kept = JSON.parse(readFileSync(written, 'utf8')) as Record<string, unknown>;
  assert.deepEqual(kept, control.json);
  assert.ok(Object.keys(kept).every((k) => SNAPSHOT_FIELDS.includes(k)));
  assert.equal(existsSync(`${written}.tmp`), false);
  assert.deepEqual(readSnapshots(results), [control]);
  assert.throws(
    () => snapshot('hf', out, results),
    (e: unknown) => e instanceof ConfigError && e.path === '--snapshot' && /npm run bench -- hf/.test(e.message),
  );
});

test('docs/results.md is what the generator writes from the committed bench/results/*.json', () => {
  assert.equal(
    readFileSync(RESULTS_DOC, 'utf8'),
    renderResults(readSnapshots(RESULTS_DIR)),
    'regenerate it with `npm run results:table`',
  );
});

test("the README's table: the same rows, seven columns, between its markers; a README without them is a DataError", () => {
  const snapshots = fabricatedSnapshots();
  const full = renderResults(snapshots)
    .split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('| ---'));
  const short = renderReadmeTable(snapshots)
    .split('\n')
    .filter((l) => !l.startsWith('| ---'));
  assert.equal(short.length, full.length, 'one README row per table row, plus the header');
  assert.equal(
    short[0],
    '| Method | Task | Matched control | Headline | Mean ± spread over seeds | Verdict | Commit |',
  );
  // each README row is its table row without the snapshot column
  short.slice(1).forEach((l, i) => {
    const c = full[i + 1].slice(2, -2).split(' | ');
    assert.equal(l, `| ${c.slice(0, 7).join(' | ')} |`);
  });
  const readme = `# x\n\nbefore\n${README_BEGIN}\nold table\n${README_END}\nafter\n`;
  const spliced = spliceReadme(readme, 'NEW');
  assert.equal(
    spliced,
    `# x\n\nbefore\n${README_BEGIN}\n<!-- prettier-ignore-start -->\nNEW\n<!-- prettier-ignore-end -->\n${README_END}\nafter\n`,
  );
  assert.equal(spliceReadme(spliced, 'NEW'), spliced, 'idempotent');
  assert.throws(
    () => spliceReadme('# no markers\n', 'NEW', 'README.md'),
    (e: unknown) => e instanceof DataError && /README\.md has no results-table markers/.test(e.message),
  );
});

test("README.md's results table is what the generator writes from the committed bench/results/*.json", () => {
  const readme = readFileSync(README, 'utf8');
  assert.equal(
    readme,
    spliceReadme(readme, renderReadmeTable(readSnapshots(RESULTS_DIR))),
    'regenerate it with `npm run results:table`',
  );
});

test('a tokens-to-target ratio says how many runs reached the target, and no verdict when none did', () => {
  const base = { name: 'methods-x', commit: 'a'.repeat(40), dirty: false, task: 'scratchpad' };
  const key = 'treepo_tokens_to_target_gain';
  const snap = (reached: { method: number; control: number }) => ({
    file: 'bench/results/methods-x.json',
    json: { ...base, headline: { [key]: 1.1 }, headline_seeds: { [key]: [1, 1.1, 1.2] }, reached: { [key]: reached } },
  });
  const rowOf = (text: string) => text.split('\n').find((l) => l.includes(`\`${key}\``))!;
  const none = rowOf(renderResults([snap({ method: 0, control: 0 })]));
  assert.match(none, /target reached by 0\/3 method and 0\/3 control runs\) \| target not reached \|/);
  const some = rowOf(renderResults([snap({ method: 3, control: 1 })]));
  assert.match(
    some,
    /1\.10× ± 0\.10× \(3 seeds; target reached by 3\/3 method and 1\/3 control runs\) \| within noise \|/,
  );
  const all = rowOf(renderResults([snap({ method: 3, control: 3 })]));
  assert.match(all, /1\.10× ± 0\.10× \(3 seeds\) \| within noise \|/);
});

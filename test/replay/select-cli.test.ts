/**
 * `arbor select`: a tiny synthetic run directory (config.resolved.yaml over a `dataset` task, trees
 * logged every step, written by the test) → subset.jsonl → the `dataset` task trains on it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { addNode, createTree, treeToJSON, type RolloutTree } from '../../src/core/tree.js';
import { ArborError, DataError } from '../../src/core/errors.js';
import { selectCommand } from '../../src/cli/select.js';
import { getTask, type DatasetTask } from '../../src/tasks/index.js';

/** Each item's mean reward at visits 1..3 (4 leaves per tree, so quarters are exact). */
const CURVES: Record<string, number[]> = {
  q1: [0, 0.5, 1], // learns: follows the run's curve
  q2: [0, 0.25, 0.75], // learns more slowly
  q3: [1, 1, 1], // always solved
  q4: [0, 0, 0], // never solved
  q5: [0.25, 0.5, 0.75],
  q6: [0.5, 0.5, 0.5],
};

function leafTree(step: number, item: string, mean: number): RolloutTree {
  const t = createTree(`step${step}/${item}`, item, [1, 2]);
  const ones = Math.round(mean * 4);
  for (let k = 0; k < 4; k++) addNode(t, '0', { tokens: [3], finishReason: 'stop' }).reward = k < ones ? 1 : 0;
  return t;
}

/** A run directory: data.jsonl (ids q1..q6 plus an unseen q7), config.resolved.yaml, trees/step-{1,2,3}.jsonl. */
function syntheticRun(extraItem?: string): { root: string; run: string; data: string } {
  const root = mkdtempSync(join(tmpdir(), 'arbor-select-'));
  const data = join(root, 'data.jsonl');
  const ids = [...Object.keys(CURVES), 'q7'];
  writeFileSync(
    data,
    ids
      .map((id, i) => JSON.stringify({ id, question: `What is ${i} + ${i}?`, solution: String(2 * i) }) + '\n')
      .join(''),
  );
  const run = join(root, 'runs', 'sel');
  mkdirSync(join(run, 'trees'), { recursive: true });
  const task = {
    name: 'dataset',
    options: {
      train: data,
      fields: { prompt: 'question', answer: 'solution', id: 'id' },
      template: 'Q: {prompt}\nA:',
      testFraction: 0,
      verifier: 'numeric',
    },
  };
  writeFileSync(
    join(run, 'config.resolved.yaml'),
    YAML.stringify({ run: { name: 'sel', logTreesEvery: 1, trainItems: 100, seed: 7 }, task }),
  );
  for (let step = 1; step <= 3; step++) {
    const trees = Object.entries(CURVES).map(([id, c]) => leafTree(step, id, c[step - 1]));
    if (extraItem) trees.push(leafTree(step, extraItem, 0.5));
    writeFileSync(join(run, 'trees', `step-${step}.jsonl`), trees.map(treeToJSON).join('\n') + '\n');
  }
  return { root, run, data };
}

/** Run the command in-process, capturing what it prints. */
async function select(argv: string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => void lines.push(a.join(' '));
  try {
    return { code: await selectCommand(argv), out: lines.join('\n') };
  } finally {
    console.log = log;
  }
}

const readRows = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map(
      (l) =>
        JSON.parse(l) as {
          id: string;
          prompt: string;
          answer: string;
          score: number;
          cluster?: number;
          curve: number[];
        },
    );

test('arbor select --method limr --top 2: the two items whose curves follow the run, rows a dataset task trains on', async () => {
  const { root, run } = syntheticRun();
  const out = join(root, 'subset.jsonl');
  const r = await select([run, '--method', 'limr', '--top', '2', '--to', out]);
  assert.equal(r.code, 0);
  // learning curve [7/24, 11/24, 2/3], normaliser Σ (1 − r̄)² = 0.90625: q5 1 − 0.0104/0.90625 ≈ 0.989,
  // q6 ≈ 0.920, q2 ≈ 0.851, q1 ≈ 0.782, q4 ≈ 0.184, q3 0 (LIMR favours curves shaped like the run's)
  const rows = readRows(out);
  assert.deepEqual(
    rows.map((x) => x.id),
    ['q5', 'q6'],
  );
  assert.equal(rows[0].prompt, 'Q: What is 4 + 4?\nA:');
  assert.equal(rows[0].answer, '8');
  assert.deepEqual(rows[0].curve, [0.25, 0.5, 0.75]);
  assert.ok(
    Math.abs(rows[0].score - (1 - (2 * (1 / 24) ** 2 + (1 / 12) ** 2) / 0.90625)) < 1e-9,
    `q5 score ${rows[0].score}`,
  );
  assert.match(r.out, /limr: 6 items ranked from 18 trees in 3 tree files; 0 left unscored/);
  assert.match(r.out, /kept 2 of 6 \(top 2\)/);
  assert.match(r.out, /score histogram/);
  // round trip: the dataset task reads the subset back (same prompts, answers, ids)
  const task = getTask('dataset', {
    train: out,
    fields: { id: 'id' },
    testFraction: 0,
    verifier: 'numeric',
  }) as DatasetTask;
  await task.prepare();
  const items = task.makeItems('train', 100, 0);
  assert.deepEqual(items.map((i) => i.id).sort(), ['q5', 'q6']);
  const q5 = items.find((i) => i.id === 'q5')!;
  assert.equal(q5.prompt, 'Q: What is 4 + 4?\nA:');
  assert.equal(q5.answer, '8');
  assert.equal((await task.reward.score({ response: '8', item: q5 })).reward, 1);
  assert.equal((await task.reward.score({ response: '9', item: q5 })).reward, 0);
});

test('arbor select --method s2l: a budget spread over clusters, seeded; threshold mode for limr', async () => {
  const { root, run } = syntheticRun();
  const a = join(root, 'a.jsonl');
  const b = join(root, 'b.jsonl');
  const r = await select([run, '--method', 's2l', '--top', '3', '--clusters', '3', '--seed', '5', '--to', a]);
  assert.equal(r.code, 0);
  await select([run, '--method', 's2l', '--top', '3', '--clusters', '3', '--seed', '5', '--to', b]);
  const rows = readRows(a);
  assert.equal(rows.length, 3);
  assert.deepEqual(readRows(b), rows, 'same seed, same subset');
  assert.equal(new Set(rows.map((x) => x.cluster)).size, 3, 'one item from each of 3 clusters');
  assert.match(r.out, /clusters \(k-means, 3\): sizes/);
  const t = join(root, 't.jsonl');
  await select([run, '--threshold', '0.5', '--to', t]);
  const kept = readRows(t);
  assert.ok(kept.every((x) => x.score >= 0.5));
  assert.deepEqual(
    kept.map((x) => x.id),
    ['q5', 'q6', 'q2', 'q1'],
  );
});

test('arbor select errors: --to required, existing file, s2l without a budget or with a threshold, unknown item, nothing kept', async () => {
  const { root, run } = syntheticRun();
  const out = join(root, 'o.jsonl');
  await assert.rejects(
    select([run, '--top', '2']),
    (e: unknown) => e instanceof ArborError && /--to FILE is required/.test((e as Error).message),
  );
  writeFileSync(out, 'x');
  await assert.rejects(
    select([run, '--top', '2', '--to', out]),
    (e: unknown) => e instanceof ArborError && /exists; pass --force/.test((e as Error).message),
  );
  assert.equal((await select([run, '--top', '2', '--to', out, '--force'])).code, 0);
  await assert.rejects(
    select([run, '--method', 's2l', '--to', out, '--force']),
    (e: unknown) => e instanceof ArborError && /select\.top/.test((e as Error).message),
  );
  await assert.rejects(
    select([run, '--method', 's2l', '--top', '2', '--threshold', '0.2', '--to', out, '--force']),
    (e: unknown) => e instanceof ArborError && /--threshold is for limr/.test((e as Error).message),
  );
  await assert.rejects(
    select([run, '--threshold', '2', '--to', out, '--force']),
    (e: unknown) => e instanceof ArborError && /no item kept/.test((e as Error).message),
  );
  const other = syntheticRun('zz');
  await assert.rejects(
    select([other.run, '--top', '7', '--to', join(other.root, 'o.jsonl')]),
    (e: unknown) => e instanceof DataError && /item "zz"/.test((e as Error).message),
  );
});

test('arbor select is registered in the CLI (help)', () => {
  const r = spawnSync(process.execPath, ['bin/arbor.mjs', 'select', '--help'], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /usage: arbor select <run-dir>/);
  assert.match(r.stdout, /--method limr\|s2l/);
});

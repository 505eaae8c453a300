/**
 * Issue 17, defect 6: one over-long dataset row used to crash a run mid-way ("context of 131 tokens
 * leaves no room") naming no file, line or id. Now prompts are checked when the run loads its items:
 * `task.overlong: error` (default) fails at once with file:line and id, `skip` leaves them out.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataError } from '../../src/core/errors.js';
import type { TaskItem } from '../../src/core/types.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { fitPrompts } from '../../src/run/prompts.js';

const item = (id: string, prompt: string, meta?: Record<string, unknown>): TaskItem => ({
  id,
  prompt,
  answer: '1',
  meta,
});
const encode = (i: TaskItem) => [0, ...Array.from(i.prompt, (c) => c.charCodeAt(0))];

test('fitPrompts: error names file:line and id; skip keeps the others and counts; a prompt exactly at the context is over-long', () => {
  const items = [
    item('a', 'x'.repeat(5)),
    item('b', 'y'.repeat(7), { file: 'data/q.jsonl', line: 42 }),
    item('c', 'z'),
  ];
  assert.throws(
    () => fitPrompts(items, encode, 8, 'error', 'training'),
    (e: unknown) =>
      e instanceof DataError &&
      e.file === 'data/q.jsonl' &&
      e.line === 42 &&
      /data\/q\.jsonl:42 \(id b\): the training prompt is 8 tokens, which leaves no room for a response in the model's context of 8/.test(
        e.message,
      ),
  );
  assert.deepEqual(fitPrompts(items, encode, 8, 'skip', 'training'), {
    items: [items[0], items[2]],
    skipped: 1,
    skippedSources: ['data/q.jsonl:42 (id b)'],
  });
  assert.deepEqual(
    fitPrompts(items, encode, 9, 'error', 'training'),
    { items, skipped: 0, skippedSources: [] },
    '8 tokens in a context of 9 leave one',
  );
  assert.deepEqual(
    fitPrompts(items, encode, undefined, 'error', 'training').skipped,
    0,
    'no context known (remote engine): nothing checked',
  );
  assert.throws(() => fitPrompts([items[1]], encode, 4, 'skip', 'training'), /every training prompt \(1\) is longer/);
});

test(
  'a dataset with one over-long row: the run fails before its first step naming file:line; with skip it trains',
  { timeout: 300_000 },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-overlong-'));
    const file = join(dir, 'q.jsonl');
    const rows = Array.from({ length: 30 }, (_, i) =>
      JSON.stringify({ question: `${i % 5}+1=`, answer: String((i % 5) + 1) }),
    );
    rows[17] = JSON.stringify({ question: `${'9'.repeat(60)}+1=`, answer: '1' + '0'.repeat(60) });
    writeFileSync(file, rows.join('\n') + '\n');
    const config = (name: string, overlong?: string) =>
      parseConfig({
        run: {
          name,
          outDir: join(dir, name),
          steps: 1,
          promptsPerStep: 4,
          evalEvery: 0,
          evalCount: 4,
          evalPassK: 0,
          logTreesEvery: 0,
          trainItems: 30,
        },
        task: {
          name: 'dataset',
          options: { train: file, fields: { prompt: 'question', answer: 'answer' }, testFraction: 0.2 },
          ...(overlong ? { overlong } : {}),
        },
        model: { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 32 },
        sft: { steps: 5, batchSize: 8, examples: 16, checkpoint: join(dir, 'sft') },
        sampling: { maxResponseTokens: 8 },
        generate: { kind: 'iid', groupSize: 2 },
      });
    await assert.rejects(
      train(config('strict'), { quiet: true }),
      (e: unknown) =>
        e instanceof DataError && e.message.includes(`${file}:18 (id q:18)`) && /is 6\d tokens/.test(e.message),
    );
    const summary = await train(config('lenient', 'skip'), { quiet: true });
    assert.equal(summary.steps, 1);
  },
);

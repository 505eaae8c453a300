/**
 * Held-out evaluation with progress: `evaluate` with a progress sink samples in calls of a tenth and
 * reports "evaluating: <done>/<total> samples eta <time>", a milestone every tenth, with results equal
 * to one call's; `arbor eval` into a pipe prints those lines on stderr (and nothing with --quiet), and
 * `arbor train` prints them for its held-out evaluations (test/run/sft-progress.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Rng } from '../../src/core/rng.js';
import { saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import type { Sampler } from '../../src/engine/types.js';
import { evaluate, type EvalContext } from '../../src/run/evaluate.js';
import { promptEncoder, stopTokens } from '../../src/run/prompts.js';
import { getTask } from '../../src/tasks/index.js';

const TASK = { digits: 1, ops: ['+'] };

async function tinyModel(): Promise<{ model: NanoModel; tokenizer: CharTokenizer }> {
  const tokenizer = new CharTokenizer();
  const config = { vocabSize: tokenizer.vocabSize, dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 32 };
  return { model: await NanoModel.create(config, { seed: 5 }), tokenizer };
}

/** `lines` as the sample counts they report, checked against the line's shape. */
function counts(lines: string[], total: number): number[] {
  const shape = new RegExp(`^evaluating: (\\d+)/${total} samples eta (\\d+m)?\\d+s$`);
  for (const l of lines) assert.match(l, shape);
  return lines.map((l) => Number(shape.exec(l)![1]));
}

/** Each step between counts is at most a tenth of the total, and the last is the total. */
function everyTenth(done: number[], total: number): void {
  for (const [i, d] of done.entries()) assert.ok(d - (done[i - 1] ?? 0) <= Math.ceil(total / 10), done.join(' '));
  assert.equal(done.at(-1), total);
}

test('evaluate with progress: calls of a tenth of the samples reported as they finish, the same results as one call', async () => {
  const { model, tokenizer } = await tinyModel();
  const sampler = new NanoSampler(model);
  const calls: number[] = [];
  const counted: Sampler = Object.assign(Object.create(sampler) as Sampler, {
    sample: (...args: Parameters<Sampler['sample']>) => (calls.push(args[0].length), sampler.sample(...args)),
  });
  const task = getTask('arith', TASK);
  const items = task.makeItems('test', 20, 0);
  assert.equal(items.length, 20);
  const context = (progress?: EvalContext['progress']): EvalContext => ({
    sampler: counted,
    encodePrompt: promptEncoder(tokenizer, false),
    decode: (t) => tokenizer.decode(t),
    stopTokens: stopTokens(tokenizer),
    maxResponseTokens: 8,
    reward: task.reward,
    rng: new Rng(7),
    progress,
  });
  const once = await evaluate(items, 3, context());
  assert.deepEqual(calls, [40]);
  calls.length = 0;
  const seen: Array<[string, boolean]> = [];
  const reported = await evaluate(
    items,
    3,
    context((text, milestone) => seen.push([text, milestone])),
  );
  // 20 greedy samples + 20 × 3 sampled = 80, in calls of at most 8 samples: 8 greedy requests, or 4 greedy and
  // a sampled one, or 2 sampled ones
  assert.deepEqual(calls, [8, 8, 5, ...Array(9).fill(2), 1]);
  const done = counts(
    seen.map(([t]) => t),
    80,
  );
  everyTenth(done, 80);
  assert.ok(seen.every(([, milestone]) => milestone));
  assert.deepEqual(reported, once);
});

test('arbor eval into a pipe: a line every tenth of the samples on stderr; --quiet prints none', () => {
  const root = mkdtempSync(join(tmpdir(), 'arbor-eval-progress-'));
  return tinyModel().then(({ model, tokenizer }) => {
    try {
      saveCheckpoint(join(root, 'ckpt'), model, tokenizer);
      const argv = ['eval', '--checkpoint', join(root, 'ckpt'), '--task', 'arith', '--options', JSON.stringify(TASK)];
      const run = (extra: string[]) =>
        spawnSync(process.execPath, [resolve('bin/arbor.mjs'), ...argv, '--count', '20', '--k', '2', ...extra], {
          encoding: 'utf8',
          timeout: 60_000,
          env: { ...process.env, CI: '' },
        });
      const r = run(['--max-tokens', '8']);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(JSON.parse(r.stdout).count, 20);
      assert.doesNotMatch(r.stderr, /\r/);
      const lines = r.stderr.split('\n').filter((l) => l.startsWith('evaluating:'));
      everyTenth(counts(lines, 60), 60);
      assert.match(r.stderr, /^arbor eval: 20 items evaluated in \d+\.\d s$/m);
      const quiet = run(['--max-tokens', '8', '--quiet']);
      assert.equal(quiet.status, 0, quiet.stderr);
      assert.equal(quiet.stderr, '');
      assert.deepEqual(JSON.parse(quiet.stdout), JSON.parse(r.stdout));
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

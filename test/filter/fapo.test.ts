/**
 * FAPO's reward R = R_outcome − λ·1[flawed] on each case of the scratchpad judge (clean correct, flawed
 * correct, wrong answer, unparseable), the paper's α/β sign flip of a flawed positive's centred reward,
 * config errors that name the key, and a 2-step `arbor train` of the FAPO example.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import YAML from 'yaml';
import { ConfigError } from '../../src/core/errors.js';
import { fapoReward, isFlawed } from '../../src/filter/fapo.js';
import { rewardFromConfig } from '../../src/filter/registry.js';
import { parseConfig } from '../../src/run/config.js';
import { firstWrongStep, getTask, scratchpadLines } from '../../src/tasks/index.js';

const task = getTask('scratchpad');
const item = { id: '347*86=', prompt: '347*86=', answer: '29842' };
const clean = scratchpadLines(347, 86).join('\n');
const flawed = scratchpadLines(347, 86, { kind: 'flawed_correct', step: 5 }).join('\n');
const slipped = scratchpadLines(347, 86, { kind: 'dropped_carry', step: 1 }).join('\n');
const fapo = (lambda: number, unparseableIsFlawed = false) =>
  rewardFromConfig(
    { parts: parseConfig({ reward: { parts: [{ kind: 'fapo', lambda, unparseableIsFlawed }] } }).reward.parts },
    { taskReward: task.reward, taskStepJudge: firstWrongStep },
  );

test('FAPO: clean correct 1, flawed correct 1 − λ, wrong 0 (no judge call), unparseable correct 1', async () => {
  const reward = fapo(0.5);
  const score = (response: string) => reward.score({ response, item });
  assert.deepEqual(await score(clean), {
    reward: 1,
    components: { correct: 1, flawed: 0 },
    info: { extracted: '29842', firstWrongStep: null },
  });
  assert.deepEqual(await score(flawed), {
    reward: 0.5,
    components: { correct: 1, flawed: 1 },
    info: { extracted: '29842', firstWrongStep: 5 },
  });
  assert.deepEqual(await score(slipped), {
    reward: 0,
    components: { correct: 0, flawed: 0 },
    info: { extracted: '29802', firstWrongStep: null },
  });
  assert.equal((await score('guess;29842')).reward, 1);
  assert.equal((await fapo(0.5, true).score({ response: 'guess;29842', item })).reward, 0.5);
  assert.equal((await fapo(1).score({ response: flawed, item })).reward, 0);
});

test('the judge is asked about correct leaves only', async () => {
  const asked: string[] = [];
  const judge = (_: unknown, response: string) => (asked.push(response), 0);
  const reward = fapoReward(task.reward, judge, { lambda: 1, unparseableIsFlawed: false });
  await reward.score({ response: slipped, item });
  assert.deepEqual(asked, []);
  assert.equal((await reward.score({ response: clean, item })).reward, 0);
  assert.deepEqual(asked, [clean]);
  assert.equal(isFlawed(0, 3, true), false);
  assert.equal(isFlawed(1, -1, false), false);
  assert.equal(isFlawed(1, 0, false), true);
});

test("a flawed positive's centred reward flips sign where the paper says (α/β = 2/λ − 1 on ±1)", async () => {
  // groups of 10: a clean correct, b wrong, one flawed; on the 0/1 scale with λ = 0.5 (±1 with λ = 1)
  // the flawed leaf's reward 0.5 is above the group mean while clean < wrong, below once clean > wrong
  const reward = fapo(0.5);
  const centred = async (cleanCount: number, wrongCount: number) => {
    const responses = [...Array<string>(cleanCount).fill(clean), ...Array<string>(wrongCount).fill(slipped), flawed];
    const rewards = await Promise.all(responses.map(async (r) => (await reward.score({ response: r, item })).reward));
    const mean = rewards.reduce((s, r) => s + r, 0) / rewards.length;
    return rewards[rewards.length - 1] - mean;
  };
  assert.ok((await centred(2, 7)) > 0);
  assert.equal(await centred(4, 4), 0);
  assert.ok((await centred(7, 2)) < 0);
});

test('config errors name the key: fapo on a task without a step judge, unknown judge, negative λ', async () => {
  const parts = parseConfig({ reward: { parts: [{ kind: 'fapo' }] } }).reward.parts;
  assert.throws(
    () => rewardFromConfig({ parts }, { taskReward: getTask('arith').reward }),
    (e: unknown) =>
      e instanceof ConfigError && e.path === 'reward.parts.0.judge' && /needs a task with a step judge/.test(e.message),
  );
  assert.throws(
    () => parseConfig({ reward: { parts: [{ kind: 'fapo', judge: 'model' }] } }),
    (e: unknown) => e instanceof ConfigError && /reward\.parts\.0\.judge/.test(e.message),
  );
  assert.throws(
    () => parseConfig({ reward: { parts: [{ kind: 'fapo', lambda: -1 }] } }),
    (e: unknown) => e instanceof ConfigError && /reward\.parts\.0\.lambda/.test(e.message),
  );
});

test(
  'arbor train: 2 steps of the FAPO example on a tiny model run and log flawed_positive_ratio',
  { timeout: 300_000 },
  () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-fapo-'));
    try {
      const config = YAML.parse(readFileSync('examples/scratchpad-fapo.yaml', 'utf8'));
      config.run = { ...config.run, steps: 2, promptsPerStep: 2, evalEvery: 0, outDir: join(dir, 'run') };
      config.run.trainItems = 50;
      config.model = { ...config.model, dModel: 16, nLayers: 1, nHeads: 2, dFF: 32 };
      config.sft = { ...config.sft, steps: 5, examples: 64, checkpoint: join(dir, 'sft') };
      config.generate.groupSize = 2;
      writeFileSync(join(dir, 'config.yaml'), YAML.stringify(config));
      const r = spawnSync(process.execPath, [resolve('bin/arbor.mjs'), 'train', join(dir, 'config.yaml')], {
        encoding: 'utf8',
        timeout: 240_000,
      });
      assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
      const metrics = readFileSync(join(dir, 'run', 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { step: number; flawed_positive_ratio?: number });
      assert.deepEqual(
        metrics.filter((m) => m.step > 0).map((m) => m.step),
        [1, 2],
      );
      // FAPO runs log the flawed share of correct leaves every step (the main job's metrics do not have it)
      for (const m of metrics.filter((x) => x.step > 0)) assert.equal(typeof m.flawed_positive_ratio, 'number');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

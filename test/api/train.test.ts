/**
 * The public `train` and `evaluate` on a config that names user modules for the
 * task, a reward part and the environment, in async mode: the rollout worker thread loads the modules
 * itself (it gets the config with absolute paths), a reward that throws on some responses scores the
 * failure reward and is counted in the step log, and `evaluate` scores the run's newest checkpoint on
 * the module task's test split.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import YAML from 'yaml';
import { evaluate, train } from 'arbor';
import { treeFromJSON } from '../../src/core/tree.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { RunDir } from '../../src/run/rundir.js';

const root = mkdtempSync(join(tmpdir(), 'arbor-api-train-'));

test(
  'train(): async mode, task, reward and environment from user modules; evaluate() on the run',
  { timeout: 300_000 },
  async () => {
    const outDir = join(root, 'async');
    const config = {
      run: {
        name: 'api-async',
        outDir,
        seed: 1,
        steps: 3,
        promptsPerStep: 4,
        evalCount: 8,
        evalPassK: 0,
        logTreesEvery: 1,
        mode: 'async',
        maxStaleness: 1,
      },
      task: { module: './count-task.ts', options: { offset: 10 } },
      reward: {
        parts: [
          { kind: 'module', module: './length-reward.ts', options: { maxChars: 6, failOn: '5' } },
          { kind: 'env', weight: 0.5 },
        ],
        failureReward: -3,
      },
      env: { kind: 'module', module: './notes-env.ts' },
      model: { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 96 },
      sft: { enabled: false },
      sampling: { maxResponseTokens: 24 },
      generate: { kind: 'agent', groupSize: 4, maxTurns: 2, maxTurnTokens: 12 },
    };
    // module paths of a config object resolve against baseDir
    const summary = await train(config, { run: { steps: 2 } }, { baseDir: resolve('testkit/api'), quiet: true });
    assert.equal(summary.steps, 2);
    assert.equal(summary.mode, 'async');
    const resolved = YAML.parse(readFileSync(join(outDir, 'config.resolved.yaml'), 'utf8'));
    assert.equal(resolved.task.module, resolve('testkit/api/count-task.ts'));
    const steps = new RunDir(outDir).readMetrics().filter((m) => m.step > 0);
    assert.equal(steps.length, 2);
    // the worker scored with the module reward: its component is logged, and its throws were counted
    const trees = [1, 2].map((s) => readFileSync(join(outDir, 'trees', `step-${s}.jsonl`), 'utf8')).join('');
    const logged = trees
      .trim()
      .split('\n')
      .map((line) => treeFromJSON(line));
    const nodes = logged.flatMap((t) => Object.values(t.nodes));
    assert.ok(
      nodes.some((n) => n.rewardInfo?.components.short === 1),
      'the module reward "short" scored leaves',
    );
    const failures = steps.reduce((a, m) => a + (m.reward_failures as number), 0);
    const thrown = nodes.filter(
      (n) => n.finishReason === 'error' && /the prompt contains "5"/.test(n.error ?? ''),
    ).length;
    assert.ok(thrown > 0, 'some prompts contain "5" (seeded)');
    assert.equal(failures, thrown, 'every failed reward is counted in the step log');
    assert.ok(
      nodes.some((n) => n.error && n.reward === -3),
      'a failed reward scores reward.failureReward',
    );
    // every prompt offers the environment's tools: the worker built the environment from its module
    const prompts = logged.map((t) => new CharTokenizer().decode(t.nodes['0'].tokens));
    assert.deepEqual([...new Set(prompts.map((p) => p.split('\n')[0]))], ['tools: note(key,value) read(key)']);

    const report = await evaluate(join(outDir, 'config.resolved.yaml'), { checkpoint: outDir, count: 5, k: 0 });
    assert.equal(report.task, 'count');
    assert.equal(report.count, 5);
    assert.match(String(report.model), /checkpoints\/step-2\/engine$/);
    const samples = report.samples as Array<{ prompt: string }>;
    // the test split of the module task with the run's options and seed: (n + 1) % 100 + 10 for n = 0, 5, ...
    assert.deepEqual(
      samples.map((s) => s.prompt.split('\n').pop()),
      ['11+1=', '16+1=', '21+1=', '26+1=', '31+1='],
    );
  },
);

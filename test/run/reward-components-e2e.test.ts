/**
 * End to end: a short `train()` with a two-part composite reward (`reward.parts`: the task's verifier
 * and a format check) writes `reward/<part>` in every step's metrics.jsonl line, each the mean of that
 * component over the step's scored leaves as logged in trees/step-N.jsonl (the step's drawn trees).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { train } from '../../src/api/run.js';
import { isComplete, leaves, treeFromJSON } from '../../src/core/tree.js';
import { RunDir } from '../../src/run/rundir.js';

test('train(): reward.parts of two parts logs reward/<part name> per step', { timeout: 60_000 }, async () => {
  const root = mkdtempSync(join(tmpdir(), 'arbor-reward-components-'));
  try {
    const outDir = join(root, 'run');
    await train(
      {
        run: {
          name: 'reward-components',
          outDir,
          seed: 2,
          steps: 2,
          promptsPerStep: 4,
          evalEvery: 0,
          evalCount: 4,
          evalPassK: 0,
          checkpointEvery: 0,
          logTreesEvery: 1,
          trainItems: 40,
        },
        task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
        model: { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 32 },
        sft: { enabled: false },
        sampling: { maxResponseTokens: 6 },
        generate: { kind: 'treepo', groupSize: 4, segmentLength: 3, branchingFactor: 2, initialDivergence: 2 },
        reward: {
          parts: [
            { kind: 'task', weight: 1 },
            { kind: 'format', weight: 0.5, pattern: '\\d' },
          ],
        },
      },
      {},
      { quiet: true },
    );
    const steps = new RunDir(outDir).readMetrics().filter((m) => m.step > 0);
    assert.equal(steps.length, 2);
    for (const m of steps) {
      const components = Object.keys(m).filter((k) => k.startsWith('reward/'));
      assert.deepEqual(components, ['reward/correct', 'reward/format'], `step ${m.step}`);
      const scored = readFileSync(join(outDir, 'trees', `step-${m.step}.jsonl`), 'utf8')
        .trim()
        .split('\n')
        .map((l) => treeFromJSON(l))
        .filter(isComplete)
        .flatMap(leaves)
        .filter((l) => l.finishReason !== 'error');
      assert.ok(scored.length > 0);
      const meanOf = (name: string) => scored.reduce((a, l) => a + l.rewardInfo!.components[name], 0) / scored.length;
      assert.equal(m['reward/correct'], meanOf('correct'));
      assert.equal(m['reward/format'], meanOf('format'));
      // every leaf carries both parts, so the weighted sum of the part means is the mean reward
      const weighted = (m['reward/correct'] as number) + 0.5 * (m['reward/format'] as number);
      assert.ok(Math.abs(weighted - (m.reward_mean as number)) < 1e-12, `${weighted} vs ${m.reward_mean}`);
    }
    assert.ok(
      steps.some((m) => (m['reward/format'] as number) > 0),
      'the format part scored some leaves 1 (the check is not vacuous)',
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

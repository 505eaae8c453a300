import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';

const base = (outDir: string, overrides: Record<string, unknown> = {}) =>
  parseConfig({
    run: { name: 'e2e', outDir, seed: 3, steps: 16, promptsPerStep: 16, evalEvery: 0, evalCount: 100, evalPassK: 0, checkpointEvery: 0, logTreesEvery: 4, trainItems: 400 },
    task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
    model: { dModel: 32, nLayers: 2, nHeads: 2, dFF: 64, contextLength: 48 },
    sft: { steps: 40, batchSize: 32, learningRate: 0.01, examples: 400, checkpoint: join(outDir, '..', 'sft') },
    sampling: { maxResponseTokens: 16 },
    generate: { kind: 'treepo', groupSize: 8, segmentLength: 4, branchingFactor: 2, initialDivergence: 2 },
    optimize: { advantage: { kind: 'tree' } },
    trainer: { learningRate: 0.003 },
    ...overrides,
  });

test('end to end: a short SFT + TreePO run raises reward and writes the run directory', { timeout: 240_000 }, async () => {
  const root = mkdtempSync(join(tmpdir(), 'arbor-e2e-'));
  const out = join(root, 'run');
  const summary = await train(base(out), { quiet: true });
  const metrics = new RunDir(out).readMetrics().filter((m) => m.step > 0);
  assert.equal(metrics.length, 16);
  const first = metrics.slice(0, 4).reduce((s, m) => s + (m.reward_mean as number), 0) / 4;
  const last = metrics.slice(-4).reduce((s, m) => s + (m.reward_mean as number), 0) / 4;
  assert.ok(last > first + 0.05, `reward should rise: first steps ${first.toFixed(3)}, last steps ${last.toFixed(3)}`);
  assert.ok(summary.heldout_acc_end > summary.heldout_acc_start, `held-out ${summary.heldout_acc_start} → ${summary.heldout_acc_end}`);
  for (const f of ['config.resolved.yaml', 'metrics.jsonl', 'summary.json', 'report.html', 'trees/step-4.jsonl', 'checkpoints/step-16/state.json']) assert.ok(existsSync(join(out, f)), f);
  const s = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  for (const k of ['heldout_acc_start', 'heldout_acc_end', 'wall_s', 'tokens_decoded']) assert.equal(typeof s[k], 'number', k);
  assert.ok(metrics.every((m) => (m.prefix_tokens_reused as number) > 0), 'tree rollouts reuse prefixes every step');
});

test('resume: a run stopped at a checkpoint and resumed matches the uninterrupted run exactly', { timeout: 240_000 }, async () => {
  const root = mkdtempSync(join(tmpdir(), 'arbor-resume-'));
  const cfg = (name: string) => base(join(root, name), { run: { name, outDir: join(root, name), seed: 5, steps: 6, promptsPerStep: 8, evalEvery: 0, evalCount: 20, evalPassK: 0, checkpointEvery: 3, logTreesEvery: 0, trainItems: 200 } });
  await train(cfg('full'), { quiet: true });
  await train(cfg('parts'), { quiet: true, steps: 3 });
  await train(undefined, { quiet: true, resume: join(root, 'parts'), steps: 6 });
  const keys = ['reward_mean', 'loss', 'grad_norm', 'tokens_decoded', 'prefix_tokens_reused', 'entropy', 'clip_fraction'];
  const pick = (dir: string) => new RunDir(dir).readMetrics().filter((m) => m.step > 0).map((m) => Object.fromEntries(keys.map((k) => [k, m[k]])));
  const a = pick(join(root, 'full'));
  const b = pick(join(root, 'parts'));
  assert.equal(a.length, 6);
  assert.deepEqual(b, a);
  const sa = JSON.parse(readFileSync(join(root, 'full', 'summary.json'), 'utf8'));
  const sb = JSON.parse(readFileSync(join(root, 'parts', 'summary.json'), 'utf8'));
  assert.equal(sb.heldout_acc_end, sa.heldout_acc_end);
  assert.equal(sb.tokens_decoded, sa.tokens_decoded);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';
import { loadArena, loadCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { treeFromJSON, trajectories } from '../../src/core/tree.js';
import { Rng } from '../../src/core/rng.js';
import { loadKernels } from '../../src/engine/kernels/index.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { evaluate } from '../../src/run/evaluate.js';
import { promptEncoder } from '../../src/run/prompts.js';
import { getTask } from '../../src/tasks/index.js';

const base = (outDir: string, overrides: Record<string, unknown> = {}) =>
  parseConfig({
    run: {
      name: 'e2e',
      outDir,
      seed: 3,
      steps: 16,
      promptsPerStep: 16,
      evalEvery: 0,
      evalCount: 100,
      evalPassK: 0,
      checkpointEvery: 0,
      logTreesEvery: 4,
      trainItems: 400,
    },
    task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
    model: { dModel: 32, nLayers: 2, nHeads: 2, dFF: 64, contextLength: 48, tieEmbeddings: false },
    sft: { steps: 100, batchSize: 32, learningRate: 0.01, examples: 400, checkpoint: join(outDir, '..', 'sft') },
    sampling: { maxResponseTokens: 16 },
    generate: { kind: 'treepo', groupSize: 8, segmentLength: 4, branchingFactor: 2, initialDivergence: 2 },
    optimize: { advantage: { kind: 'tree' } },
    trainer: { learningRate: 0.0001 },
    ...overrides,
  });

test(
  'end to end: a short SFT + TreePO run writes the run directory and moves the policy toward rewarded trajectories',
  { timeout: 240_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-e2e-'));
    const out = join(root, 'run');
    const summary = await train(base(out), { quiet: true });
    const metrics = new RunDir(out).readMetrics().filter((m) => m.step > 0);
    assert.equal(metrics.length, 16);
    for (const f of [
      'config.resolved.yaml',
      'metrics.jsonl',
      'summary.json',
      'report.html',
      'trees/step-1.jsonl',
      'trees/step-4.jsonl',
      'checkpoints/step-16/state.json',
    ])
      assert.ok(existsSync(join(out, f)), f);
    const s = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    // a run checkpoint is a loadable model (arbor eval / serve) holding the final policy: evaluated as the
    // run's evalAt does (same test items, seed, greedy decoding), it gives the run's final held-out accuracy
    // exactly; the warm-start checkpoint gives the starting accuracy
    const cfg = base(out);
    const task = getTask(cfg.task.name, cfg.task.options);
    const heldout = async (dir: string, step: number) => {
      const { model, tokenizer } = await loadCheckpoint(dir, {
        kernels: await loadKernels({ backend: cfg.engine.kernels }),
      });
      const items = task.makeItems('test', cfg.run.evalCount, cfg.run.seed);
      const encodePrompt = promptEncoder(tokenizer, cfg.engine.chatTemplate);
      const sampler = new NanoSampler(model, { pageSize: cfg.engine.pageSize });
      return evaluate(items, cfg.run.evalPassK, {
        sampler,
        encodePrompt,
        decode: (t) => tokenizer.decode(t),
        stopTokens: [tokenizer.eos],
        maxResponseTokens: cfg.sampling.maxResponseTokens,
        reward: task.reward,
        rng: new Rng(cfg.run.seed).fork(`eval/${step}`),
      });
    };
    const [end, start] = [
      await heldout(join(out, 'checkpoints/step-16/engine'), 16),
      await heldout(join(root, 'sft'), 0),
    ];
    assert.equal(end.greedyAccuracy, s.heldout_acc_end);
    assert.equal(start.greedyAccuracy, s.heldout_acc_start);
    assert.notEqual(s.heldout_acc_end, s.heldout_acc_start, 'the two evaluations tell the checkpoints apart');
    await assert.rejects(train(base(out), { quiet: true, steps: 1 }), /already exists/);
    for (const k of ['heldout_acc_start', 'heldout_acc_end', 'wall_s', 'tokens_decoded'])
      assert.equal(typeof s[k], 'number', k);
    assert.equal(
      s.tokens_decoded,
      metrics.reduce((a, m) => a + (m.tokens_decoded as number), 0),
    );
    assert.ok(
      metrics.every((m) => (m.prefix_tokens_reused as number) > 0),
      'tree rollouts reuse prefixes every step',
    );
    assert.ok(
      metrics.some((m) => (m.reward_mean as number) > 0),
      'the warm-started policy earns reward',
    );
    assert.ok(summary.heldout_acc_start > 0, 'the warm-start solves some held-out problems');
    // RL moved probability toward the rewarded leaves of step 1 and away from the others
    const { model } = await loadCheckpoint(join(root, 'sft'));
    loadArena(model.params, join(out, 'checkpoints', 'step-16', 'engine', 'model.safetensors'));
    const trees = readFileSync(join(out, 'trees', 'step-1.jsonl'), 'utf8')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => treeFromJSON(l));
    const data = trees.flatMap((t) => trajectories(t)).filter((tr) => tr.tokens.length > 0);
    const seqs = data.map((tr) => tr.promptTokens.concat(tr.tokens));
    const lps = await new NanoTrainer(model).logprobs(
      seqs.map((q) => ({ inputTokens: q.slice(0, -1), targetTokens: q.slice(1), weights: q.slice(1).map(() => 1) })),
    );
    const delta = data.map(
      (tr, i) =>
        lps[i].slice(tr.promptTokens.length - 1).reduce((a, b) => a + b, 0) - tr.logprobs.reduce((a, b) => a + b, 0),
    );
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const good = delta.filter((_, i) => (data[i].reward ?? 0) > 0.5);
    const bad = delta.filter((_, i) => (data[i].reward ?? 0) <= 0.5);
    assert.ok(good.length > 0 && bad.length > 0);
    assert.ok(
      mean(good) > mean(bad) + 0.1,
      `Δ log-prob of rewarded leaves ${mean(good).toFixed(3)} vs others ${mean(bad).toFixed(3)}`,
    );
  },
);

test(
  'resume: a run stopped at a checkpoint and resumed matches the uninterrupted run exactly',
  { timeout: 240_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-resume-'));
    const cfg = (name: string) =>
      base(join(root, name), {
        run: {
          name,
          outDir: join(root, name),
          seed: 5,
          steps: 6,
          promptsPerStep: 8,
          evalEvery: 0,
          evalCount: 20,
          evalPassK: 0,
          checkpointEvery: 3,
          logTreesEvery: 0,
          trainItems: 200,
        },
      });
    await train(cfg('full'), { quiet: true });
    await train(cfg('parts'), { quiet: true, steps: 3 });
    await train(undefined, { quiet: true, resume: join(root, 'parts'), steps: 6 });
    const keys = [
      'reward_mean',
      'loss',
      'grad_norm',
      'tokens_decoded',
      'prefix_tokens_reused',
      'entropy',
      'clip_fraction',
    ];
    const pick = (dir: string) =>
      new RunDir(dir)
        .readMetrics()
        .filter((m) => m.step > 0)
        .map((m) => Object.fromEntries(keys.map((k) => [k, m[k]])));
    const a = pick(join(root, 'full'));
    const b = pick(join(root, 'parts'));
    assert.equal(a.length, 6);
    assert.deepEqual(b, a);
    const sa = JSON.parse(readFileSync(join(root, 'full', 'summary.json'), 'utf8'));
    const sb = JSON.parse(readFileSync(join(root, 'parts', 'summary.json'), 'utf8'));
    assert.equal(sb.heldout_acc_end, sa.heldout_acc_end);
    assert.equal(sb.tokens_decoded, sa.tokens_decoded);
  },
);

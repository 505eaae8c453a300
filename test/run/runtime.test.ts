/**
 * The runtime end to end on a tiny warm-started model: async with maxStaleness 0 equals the
 * synchronous loop; async with k > 0 trains on tokens exactly k versions old; APRIL partial rollouts
 * carry unfinished trees; an async run with partial rollouts resumed from a checkpoint equals an
 * uninterrupted one; failing trees are dropped and counted, and a run with no usable tree stops.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { generatedTokenCount, treeFromJSON } from '../../src/core/tree.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';

const root = mkdtempSync(join(tmpdir(), 'arbor-runtime-'));
const sft = join(root, 'sft');

const config = (name: string, overrides: Record<string, unknown> = {}, run: Record<string, unknown> = {}) =>
  parseConfig({
    run: {
      name,
      outDir: join(root, name),
      seed: 7,
      steps: 6,
      promptsPerStep: 8,
      evalEvery: 0,
      evalCount: 20,
      evalPassK: 0,
      checkpointEvery: 3,
      logTreesEvery: 0,
      trainItems: 200,
      ...run,
    },
    task: { name: 'arith', options: { digits: 2, minDigits: 1, ops: ['+'] } },
    model: { dModel: 32, nLayers: 2, nHeads: 2, dFF: 64, contextLength: 48, tieEmbeddings: false },
    sft: { steps: 80, batchSize: 32, learningRate: 0.01, examples: 400, checkpoint: sft },
    sampling: { maxResponseTokens: 24 },
    generate: { kind: 'iid', groupSize: 4 },
    trainer: { learningRate: 0.0003 },
    ...overrides,
  });

const KEYS = [
  'reward_mean',
  'loss',
  'grad_norm',
  'tokens_decoded',
  'prefix_tokens_reused',
  'entropy',
  'clip_fraction',
  'staleness_mean',
  'staleness_max',
  'logprob_gap',
  'carried_in',
  'carried_out',
];
const steps = (dir: string) => new RunDir(dir).readMetrics().filter((m) => m.step > 0);
const pick = (dir: string) => steps(dir).map((m) => Object.fromEntries(KEYS.map((k) => [k, m[k]])));

test(
  'async with maxStaleness 0 gives exactly the metrics of the synchronous loop (treepo)',
  { timeout: 240_000 },
  async () => {
    const treepo = {
      generate: { kind: 'treepo', groupSize: 4, segmentLength: 4, branchingFactor: 2, initialDivergence: 2 },
    };
    await train(config('sync', treepo, { steps: 4 }), { quiet: true });
    await train(config('async0', treepo, { steps: 4, mode: 'async', maxStaleness: 0 }), { quiet: true });
    const a = pick(join(root, 'sync'));
    assert.equal(a.length, 4);
    assert.ok(
      a.every((m) => m.staleness_max === 0),
      'synchronous tokens are never stale',
    );
    assert.deepEqual(pick(join(root, 'async0')), a);
  },
);

test(
  'async with maxStaleness k trains on tokens exactly min(step-1, k) versions old, with decoupled PPO',
  { timeout: 240_000 },
  async () => {
    const dir = join(root, 'async2');
    await train(
      config(
        'async2',
        { optimize: { loss: { kind: 'ppo_clip', correction: { kind: 'decoupled' } } } },
        { mode: 'async', maxStaleness: 2 },
      ),
      { quiet: true },
    );
    const ms = steps(dir);
    assert.deepEqual(
      ms.map((m) => m.staleness_max),
      [0, 1, 2, 2, 2, 2],
    );
    assert.deepEqual(
      ms.map((m) => m.weight_version),
      [1, 1, 1, 2, 3, 4],
      'batch t is generated with version base + max(0, t-1-k)',
    );
    for (const m of ms) assert.equal(typeof m.is_weight_mean, 'number', 'decoupled PPO logs its behaviour weights');
    assert.ok(
      ms.slice(2).every((m) => (m.logprob_gap as number) > 0),
      'stale batches differ from the current policy',
    );
  },
);

test(
  'APRIL: unfinished trees are carried to the next step and continued first; nothing is lost',
  { timeout: 240_000 },
  async () => {
    const dir = join(root, 'april');
    // a store of 2 trees in memory: carried and ready trees spill to disk and come back intact
    await train(config('april', { control: { kind: 'april', overProvision: 2 }, store: { maxInMemory: 2 } }), {
      quiet: true,
    });
    assert.ok(statSync(join(dir, 'store-spill.jsonl')).size > 0, 'the store spilled to disk');
    const ms = steps(dir);
    assert.ok(
      ms.some((m) => (m.carried_partial_out as number) > 0),
      'some trees were still growing when the batch was complete',
    );
    for (let i = 1; i < ms.length; i++)
      assert.equal(ms[i].carried_in, ms[i - 1].carried_out, `step ${i + 1} starts from what step ${i} carried`);
    assert.ok(
      ms.some((m) => (m.staleness_max as number) >= 1),
      'continued trees hold tokens of an older version',
    );
    assert.ok(
      ms.every((m) => m.trees_trained === 8),
      'every batch is full',
    );
    // every decoded token is in a trained tree or in a tree the store still holds
    const stored = readFileSync(join(dir, 'checkpoints', 'step-6', 'store.jsonl'), 'utf8')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => treeFromJSON(JSON.stringify(JSON.parse(l).tree)));
    const decoded = ms.reduce((a, m) => a + (m.tokens_decoded as number), 0);
    const kept =
      ms.reduce((a, m) => a + (m.batch_tree_tokens as number), 0) +
      stored.reduce((a, t) => a + generatedTokenCount(t), 0);
    assert.ok(stored.length > 0);
    assert.equal(kept, decoded);
  },
);

test(
  'resume: an async run with partial rollouts stopped at a checkpoint equals the uninterrupted run',
  { timeout: 300_000 },
  async () => {
    const overrides = {
      control: { kind: 'april', overProvision: 1.5 },
      optimize: { loss: { kind: 'ppo_clip', correction: { kind: 'tis' } } },
    };
    const async1 = { mode: 'async', maxStaleness: 1 };
    await train(config('full', overrides, async1), { quiet: true });
    await train(config('parts', overrides, async1), { quiet: true, steps: 3 });
    const state = JSON.parse(readFileSync(join(root, 'parts', 'checkpoints', 'step-3', 'state.json'), 'utf8'));
    assert.equal(state.pipeline.nextStep, 5, 'the batch produced ahead (step 4) was drained into the checkpoint');
    assert.ok(
      readFileSync(join(root, 'parts', 'checkpoints', 'step-3', 'store.jsonl'), 'utf8').includes('"batchStep":4'),
    );
    await train(undefined, { quiet: true, resume: join(root, 'parts'), steps: 6 });
    const a = pick(join(root, 'full'));
    assert.equal(a.length, 6);
    assert.deepEqual(pick(join(root, 'parts')), a);
    const sa = JSON.parse(readFileSync(join(root, 'full', 'summary.json'), 'utf8'));
    const sb = JSON.parse(readFileSync(join(root, 'parts', 'summary.json'), 'utf8'));
    assert.equal(sb.heldout_acc_end, sa.heldout_acc_end);
    assert.equal(sb.tokens_decoded, sa.tokens_decoded);
  },
);

test(
  'errors are data: trees whose reward fails are dropped and counted; a run with no usable tree stops with the reason',
  { timeout: 120_000 },
  async () => {
    // a judge at a closed loopback port: every call fails at once (connection refused)
    const judge = { kind: 'judge', baseUrl: 'http://127.0.0.1:9/v1', model: 'none', maxAttempts: 1, timeoutMs: 2000 };
    await assert.rejects(
      train(
        config(
          'errors',
          { reward: { parts: [{ kind: 'task' }, { ...judge, weight: 0.5 }] } },
          { steps: 5, checkpointEvery: 0 },
        ),
        { quiet: true },
      ),
      (error: Error) =>
        /3 consecutive steps without a usable tree/.test(error.message) && /reward: /.test(error.message),
    );
    const ms = steps(join(root, 'errors'));
    assert.equal(ms.length, 3, 'three skipped steps were logged before stopping');
    for (const m of ms) {
      assert.equal(m.trees_trained, 0);
      assert.equal(m.reward_failures, 32, 'every leaf of the 8 trees x 4 samples failed');
    }
  },
);

/**
 * The Control stage's budget decisions end to end on a tiny warm-started model: per-prompt
 * allocation (knapsack), GRESO prompt skipping and hint rescue together in one run spend exactly the
 * step budget, log their counters, keep the per-prompt statistics in the checkpoint, and a run
 * stopped at a checkpoint and resumed equals the uninterrupted one.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';
import { ConfigError } from '../../src/core/errors.js';
import { Producer } from '../../src/run/producer.js';

const root = mkdtempSync(join(tmpdir(), 'arbor-control-'));
const sft = join(root, 'sft');
after(() => rmSync(root, { recursive: true, force: true }));

const config = (name: string, overrides: Record<string, unknown> = {}, run: Record<string, unknown> = {}) =>
  parseConfig({
    run: {
      name,
      outDir: join(root, name),
      seed: 3,
      steps: 6,
      promptsPerStep: 8,
      evalEvery: 0,
      evalCount: 20,
      evalPassK: 0,
      checkpointEvery: 3,
      logTreesEvery: 0,
      trainItems: 16,
      ...run,
    },
    task: { name: 'arith', options: { digits: 2, minDigits: 1, ops: ['+'] } },
    model: { dModel: 32, nLayers: 2, nHeads: 2, dFF: 64, contextLength: 64, tieEmbeddings: false },
    sft: { steps: 150, batchSize: 32, learningRate: 0.01, examples: 400, checkpoint: sft },
    sampling: { maxResponseTokens: 36 },
    generate: { kind: 'iid', groupSize: 4 },
    trainer: { learningRate: 0.0003 },
    ...overrides,
  });

const budget = {
  control: {
    allocate: { kind: 'knapsack', firstRound: 2, maxPerPrompt: 12 },
    skip: { kind: 'greso', start: 0.5 },
    hint: { kind: 'gold_prefix', fraction: 0.5 },
  },
};
const KEYS = [
  'reward_mean',
  'loss',
  'tokens_decoded',
  'rollouts',
  'alloc_extra',
  'alloc_max_group',
  'prompts_skipped',
  'skip_p_easy',
  'hint_trees',
  'hint_rescued',
  'informative_groups',
];
const steps = (dir: string) => new RunDir(dir).readMetrics().filter((m) => m.step > 0);
const pick = (dir: string) => steps(dir).map((m) => Object.fromEntries(KEYS.map((k) => [k, m[k]])));

test(
  'allocation + skipping + hint rescue: the step budget is spent exactly, counters logged, statistics checkpointed, resume exact',
  { timeout: 300_000 },
  async () => {
    await train(config('full', budget), { quiet: true });
    const ms = steps(join(root, 'full'));
    assert.equal(ms.length, 6);
    for (const m of ms) {
      assert.equal(m.alloc_budget, 16, '8 prompts × (G − firstRound) = 16 rollouts to allocate');
      assert.equal(m.alloc_extra, 16, 'knapsack spends all of it');
      assert.equal(m.alloc_rollouts, 32, 'the fresh prompts got prompts × G rollouts in all');
      assert.equal(
        m.rollouts,
        32 + (m.hint_trees as number) * 4 - (m.hint_replaced_leaves as number),
        'hinted trees (G leaves each) replace the failed ones in the batch',
      );
      assert.equal(m.hint_trees, m.hint_candidates, 'every all-fail prompt is rescued (maxPerStep 0)');
      // hinted trees replace failed groups in place, so the batch keeps its 8 groups; a failed group that
      // no hint rescued (all rewards 0) carries no signal
      const informative = (m.informative_groups as number) * 8;
      assert.equal(informative, Math.round(informative), `a share of the batch's 8 groups: ${m.informative_groups}`);
      // this model solves under 15% of its samples, so no group is all-correct: every group but the
      // all-fail ones that no hint rescued is informative (6 steps of a deterministic run)
      const unrescued = (m.hint_candidates as number) - (m.hint_rescued as number);
      assert.equal(informative, 8 - unrescued, `step ${m.step}: ${unrescued} all-fail groups left`);
    }
    const shares = ms.map((m) => m.informative_groups as number);
    assert.ok(
      shares.some((x) => x > 0 && x < 1),
      `some steps mix informative and uninformative groups: ${shares}`,
    );
    assert.ok(
      ms.some((m) => (m.alloc_max_group as number) > 4),
      'some prompt got more than G',
    );
    assert.ok(
      ms.some((m) => (m.hint_trees as number) > 0),
      'the tiny model fails some prompts, which get hints',
    );
    const state = JSON.parse(readFileSync(join(root, 'full', 'checkpoints', 'step-6', 'state.json'), 'utf8'));
    const skipped = ms.reduce((a, m) => a + (m.prompts_skipped as number), 0);
    assert.equal(
      Object.keys(state.pipeline.control.prompts.items).length,
      16,
      'statistics of every prompt of the pool of 16 (all seen in the first epoch)',
    );
    assert.equal(
      state.pipeline.data.epoch * 16 + state.pipeline.data.cursor,
      48 + skipped,
      'skipped prompts are consumed from the data order',
    );
    assert.ok(skipped > 0, 'prompts that failed every visit get skipped');
    assert.equal(typeof state.pipeline.control.skip.pEasy, 'number');

    await train(config('parts', budget), { quiet: true, steps: 3 });
    await train(undefined, { quiet: true, resume: join(root, 'parts'), steps: 6 });
    assert.deepEqual(pick(join(root, 'parts')), pick(join(root, 'full')));
  },
);

test(
  'value-guided TreePO with ARRoL pruning: the head is calibrated and checkpointed, paths are pruned, resume exact',
  { timeout: 300_000 },
  async () => {
    const trees = {
      generate: {
        kind: 'treepo',
        groupSize: 4,
        segmentLength: 4,
        branchingFactor: 2,
        initialDivergence: 2,
        allocation: 'value',
      },
      optimize: { advantage: { kind: 'tree', level: 'segment' } },
      control: { prune: { kind: 'arrol', atRound: 1 }, qualityHead: { warmup: 16 } },
    };
    const keys = [
      'reward_mean',
      'loss',
      'tokens_decoded',
      'rollouts',
      'head_auc',
      'head_brier',
      'head_examples',
      'pruned_paths',
      'pruned_tokens',
    ];
    const pickQ = (dir: string) => steps(dir).map((m) => Object.fromEntries(keys.map((k) => [k, m[k]])));
    await train(config('qfull', trees, { logTreesEvery: 3 }), { quiet: true });
    const ms = steps(join(root, 'qfull'));
    assert.equal(ms[0].head_examples, 0);
    assert.ok((ms[5].head_examples as number) > (ms[1].head_examples as number), 'the head learns every step');
    assert.ok(
      ms.some((m) => (m.pruned_paths as number) > 0),
      'once warmed up, paths get pruned',
    );
    assert.ok(
      ms.filter((m) => (m.pruned_paths as number) > 0).every((m) => (m.rollouts as number) < 32),
      'pruning frees leaf slots',
    );
    // the AUC is out of sample: scored on a step's trees before the head learns from them, so the first
    // step (no examples yet) logs none
    assert.equal(ms[0].head_auc, undefined, 'no AUC before the head has seen an example');
    // later, exactly the steps whose trees hold both correct and wrong leaves (an AUC needs both classes)
    for (const m of ms.slice(1)) {
      const mixed = (m.reward_mean as number) > 0 && (m.reward_mean as number) < 1;
      assert.equal(typeof m.head_auc === 'number', mixed, `step ${m.step}: reward ${m.reward_mean}, AUC ${m.head_auc}`);
    }
    const aucs = ms.map((m) => m.head_auc).filter((a): a is number => typeof a === 'number');
    assert.ok(aucs.length >= 1, 'the tiny model solves some prompts, so some step has an AUC');
    // a head whose scores are all equal (untrained, or not consulted) ties every pair: exactly 0.5
    assert.ok(
      aucs.every((a) => a !== 0.5),
      `the head's scores separate nodes: ${aucs}`,
    );
    const state = JSON.parse(readFileSync(join(root, 'qfull', 'checkpoints', 'step-6', 'state.json'), 'utf8'));
    assert.equal(
      state.pipeline.control.head.w.length,
      6 + 16,
      'six statistics + the hidden state (32 entries) projected to hiddenDims 16',
    );
    assert.ok(
      state.pipeline.control.head.w.slice(6).some((w: number) => w !== 0),
      'the hidden-state weights were trained',
    );
    const logged = readFileSync(join(root, 'qfull', 'trees', 'step-3.jsonl'), 'utf8');
    assert.ok(
      logged.includes('"entropies"') && !logged.includes('"hidden"'),
      'logged trees keep entropies and leave hidden states out',
    );
    await train(config('qparts', trees), { quiet: true, steps: 3 });
    await train(undefined, { quiet: true, resume: join(root, 'qparts'), steps: 6 });
    assert.deepEqual(pickQ(join(root, 'qparts')), pickQ(join(root, 'qfull')));
  },
);

test('budget options that need the fixed batch, and allocations that leave nothing to allocate, are config errors naming the key', async () => {
  const make = (o: Record<string, unknown>) =>
    Producer.create(
      config('bad', o),
      undefined as never,
      { encode: () => [], decode: () => '', eos: 2, vocabSize: 10 } as never,
    );
  await assert.rejects(
    make({ control: { kind: 'april', allocate: { kind: 'xrpo' } } }),
    (e: unknown) =>
      e instanceof ConfigError &&
      /control\.allocate\.kind "xrpo" needs control\.kind "none"/.test(e.message) &&
      e.path === 'control.allocate.kind',
  );
  await assert.rejects(
    make({ control: { kind: 'dynamic_sampling', hint: { kind: 'example' } } }),
    (e: unknown) => e instanceof ConfigError && e.path === 'control.hint.kind',
  );
  await assert.rejects(
    make({ control: { allocate: { kind: 'knapsack', firstRound: 4 } } }),
    (e: unknown) => e instanceof ConfigError && /firstRound \(4\) must be below the group size G = 4/.test(e.message),
  );
  await assert.rejects(
    make({ control: { allocate: { kind: 'dars', firstRound: 2, maxPerPrompt: 3 } } }),
    (e: unknown) => e instanceof ConfigError && e.path === 'control.allocate.maxPerPrompt',
  );
  await assert.rejects(
    make({ control: { prune: { kind: 'arrol' } } }),
    (e: unknown) =>
      e instanceof ConfigError && e.path === 'control.prune.kind' && /needs generate.kind "treepo"/.test(e.message),
  );
  assert.throws(
    () => config('bad', { control: { allocate: { kind: 'knapsack', budget: 3 } } }),
    (e: unknown) => e instanceof ConfigError && /control\.allocate: unknown key\(s\) "budget"/.test(e.message),
  );
});

test('Control sections written at the top level (before control:) still parse, with a warning naming the new key', () => {
  const warnings: string[] = [];
  const c = parseConfig(
    { skip: { kind: 'greso' }, prune: { kind: 'none' }, control: { kind: 'april' } },
    'old.yaml',
    process.cwd(),
    (w) => warnings.push(w),
  );
  assert.equal(c.control.kind, 'april');
  assert.equal(c.control.skip.kind, 'greso');
  assert.deepEqual(warnings, [
    'old.yaml: top-level "skip" is deprecated: write it as control.skip (accepted until the next release)',
    'old.yaml: top-level "prune" is deprecated: write it as control.prune (accepted until the next release)',
  ]);
  // the nested form gives the same config and no warning; a control without a kind is the fixed batch
  const nested = parseConfig({ control: { skip: { kind: 'greso' } } }, 'new.yaml', process.cwd(), (w) =>
    warnings.push(w),
  );
  assert.equal(warnings.length, 2);
  assert.deepEqual(nested.control.skip, c.control.skip);
  assert.equal(nested.control.kind, 'none');
  assert.throws(
    () => parseConfig({ skip: { kind: 'greso' }, control: { skip: { kind: 'none' } } }, 'both.yaml'),
    (e: unknown) => e instanceof ConfigError && e.path === 'skip' && /keep control\.skip/.test(e.message),
  );
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addNode, createTree, treeFromJSON, type RolloutTree } from '../../src/core/tree.js';
import { ConfigError, DataError } from '../../src/core/errors.js';
import {
  advantagesFromConfig,
  computeAdvantages,
  requestEntropy,
  shapingInputs,
  shapingKey,
  type AdvantagedTrajectory,
  type ShapingInputs,
} from '../../src/optimize/index.js';
import type { Datum, Sampler, SampleRequest } from '../../src/engine/types.js';
import { loadConfig, parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';
import { groupTree } from '../../testkit/optimize/shaping-trees.js';

const near = (a: number, b: number, eps = 1e-9) => assert.ok(Math.abs(a - b) < eps, `${a} vs ${b}`);
const nearAll = (a: number[], b: number[], eps = 1e-9) => {
  assert.equal(a.length, b.length, `${a} vs ${b}`);
  a.forEach((x, i) => near(x, b[i], eps));
};
const softplus = (x: number) => Math.log1p(Math.exp(x));

/** rewards [1, 1, 0, 0] → dr_grpo advantages [0.5, 0.5, −0.5, −0.5]; mean log-probs s = [−1, −3, −2, −2], s̄ = −2. */
function noveltyGroup(): RolloutTree {
  return groupTree('g', [
    { reward: 1, logprobs: [-1, -1] },
    { reward: 1, logprobs: [-3, -3] },
    { reward: 0, logprobs: [-2, -2] },
    { reward: 0, logprobs: [-2, -2] },
  ]);
}

/** Every leaf gets the same inputs key → confidence shift c (policy sum c, reference sum 0). */
function aceInputs(items: AdvantagedTrajectory[], c_L: number[]): ShapingInputs {
  const keys = items.map((a) => shapingKey(a.trajectory));
  return {
    policyLogprobs: new Map(keys.map((k, i) => [k, c_L[i]])),
    referenceLogprobs: new Map(keys.map((k) => [k, 0])),
  };
}

test('novelty (XRPO): only correct samples gain, η = exp(s − s̄), the bonus capped at κ·A', () => {
  const trees = [noveltyGroup()];
  const out = computeAdvantages(trees, { kind: 'dr_grpo', shaping: [{ kind: 'novelty' }] });
  // leaf 0: η = e > 1 → λ(1 − η) < 0 → bonus 0; leaf 1: λ(1 − 1/e) = 1.58 > κA = 0.25 → cap binds
  nearAll(
    out.map((a) => a.advantage),
    [0.5, 0.75, -0.5, -0.5],
  );
  const small = computeAdvantages(trees, { kind: 'dr_grpo', shaping: [{ kind: 'novelty', lambda: 0.1 }] });
  // leaf 1: 0.1·(1 − e^−1) = 0.0632 < 0.25: the bonus itself
  near(small[1].advantage, 0.5 + 0.1 * (1 - Math.exp(-1)));
  near(small[0].advantage, 0.5);
  // the threshold decides who is correct: with correctReward 2 nobody is
  const none = computeAdvantages(trees, { kind: 'dr_grpo', shaping: [{ kind: 'novelty', correctReward: 2 }] });
  nearAll(
    none.map((a) => a.advantage),
    [0.5, 0.5, -0.5, -0.5],
  );
});

test('entropy term: ψ_t = min(α·H_t, |A_t|/κ), binding on both sides, sign kept, masked tokens untouched', () => {
  const tree = groupTree('e', [
    { reward: 1, logprobs: [-1, -1], entropies: [0.5, 2] },
    { reward: 1, logprobs: [-1, -1], entropies: [2, 2], mask: [1, 0] },
    { reward: 0, logprobs: [-1, -1], entropies: [0.5, 2] },
    { reward: 0, logprobs: [-1, -1], entropies: [0, 10] },
  ]);
  const out = computeAdvantages([tree], { kind: 'dr_grpo', shaping: [{ kind: 'entropy', alpha: 0.4, kappa: 2 }] });
  // α·H = 0.2 < 0.25 (α·H binds); α·H = 0.8 > |A|/κ = 0.25 (the cap binds)
  nearAll(out[0].tokenAdvantages!, [0.7, 0.75]);
  nearAll(out[1].tokenAdvantages!, [0.75, 0.5]);
  // negative advantages are softened, never flipped
  nearAll(out[2].tokenAdvantages!, [-0.3, -0.25]);
  nearAll(out[3].tokenAdvantages!, [-0.5, -0.25]);
  // κ = 1: the cap lets a negative advantage reach 0 and no further
  const k1 = computeAdvantages([tree], { kind: 'dr_grpo', shaping: [{ kind: 'entropy', alpha: 1, kappa: 1 }] });
  nearAll(k1[3].tokenAdvantages!, [-0.5, 0]);
});

test('entropy term: a tree without recorded entropies is a DataError naming the node', () => {
  const tree = groupTree('x', [
    { reward: 1, logprobs: [-1] },
    { reward: 0, logprobs: [-1] },
  ]);
  assert.throws(
    () => computeAdvantages([tree], { kind: 'grpo', shaping: [{ kind: 'entropy' }] }),
    (e: unknown) => e instanceof DataError && e.field === 'nodes.0.0.entropies' && /tree x node 0\.0/.test(e.message),
  );
});

test('ace: only negative advantages grow, by 1 + α·softplus(c); over-confident errors far more than others', () => {
  const trees = [noveltyGroup()];
  const base = computeAdvantages(trees, { kind: 'dr_grpo' });
  // c per leaf: a confident success, (unused) 0, an over-confident error, an exploratory error
  const inputs = aceInputs(base, [5, 0, 2, -20]);
  const out = computeAdvantages(trees, { kind: 'dr_grpo', shaping: [{ kind: 'ace' }] }, inputs);
  near(out[0].advantage, 0.5, 1e-12);
  near(out[1].advantage, 0.5, 1e-12);
  near(out[2].advantage, -0.5 * (1 + softplus(2)));
  near(out[2].advantage, -1.5634640055, 1e-9);
  near(out[3].advantage, -0.5, 1e-8);
  // normalize mean: c / policy tokens (2 each)
  const mean = computeAdvantages(
    trees,
    { kind: 'dr_grpo', shaping: [{ kind: 'ace', alpha: 0.5, normalize: 'mean' }] },
    inputs,
  );
  near(mean[2].advantage, -0.5 * (1 + 0.5 * softplus(1)));
  assert.throws(
    () => computeAdvantages(trees, { kind: 'dr_grpo', shaping: [{ kind: 'ace' }] }),
    (e: unknown) => e instanceof ConfigError && e.path === 'optimize.advantage.shaping',
  );
});

test('shapingInputs: sequence log-prob sums over policy tokens from one policy and one reference forward', async () => {
  const a = groupTree('a', [{ reward: 1, logprobs: [-1, -1], mask: [1, 1] }]);
  const b = groupTree('b', [{ reward: 0, logprobs: [-1, -1, -1], mask: [1, 0, 1] }], [1, 7]);
  const calls: Datum[][] = [];
  // log-prob at target position j: −scale·(j + 1)
  const model = (scale: number) => ({
    logprobs: async (data: Datum[]) => {
      calls.push(data);
      return data.map((d) => d.targetTokens.map((_, j) => -scale * (j + 1)));
    },
  });
  const terms = advantagesFromConfig({ shaping: [{ kind: 'ace' }] }).shaping;
  const inputs = await shapingInputs([a, b], terms, { policy: model(0.1), reference: model(0.05) });
  assert.equal(calls.length, 2);
  // tree a: prompt length 1 → targets 0, 1; tree b: prompt length 2 → targets 1, (2 masked), 3
  near(inputs.policyLogprobs!.get('a\u00000.0')!, -0.1 - 0.2);
  near(inputs.policyLogprobs!.get('b\u00000.0')!, -0.2 - 0.4);
  near(inputs.referenceLogprobs!.get('b\u00000.0')!, -0.1 - 0.2);
  assert.deepEqual(await shapingInputs([a], [], { policy: model(1) }), {});
  assert.equal(calls.length, 2, 'no forward without an ace term');
  await assert.rejects(
    shapingInputs([a], terms, { policy: model(1) }),
    (e: unknown) => e instanceof ConfigError && /reference policy/.test(e.message),
  );
});

test('composition: terms apply in the listed order (entropy then ace ≠ ace then entropy)', () => {
  const tree = groupTree('o', [
    { reward: 1, logprobs: [-1], entropies: [0.5] },
    { reward: 0, logprobs: [-1], entropies: [0.5] },
  ]);
  const items = computeAdvantages([tree], { kind: 'dr_grpo' });
  const inputs = aceInputs(items, [0, 2]);
  const f = 1 + softplus(2);
  const entropyFirst = computeAdvantages(
    [tree],
    { kind: 'dr_grpo', shaping: [{ kind: 'entropy' }, { kind: 'ace' }] },
    inputs,
  );
  const aceFirst = computeAdvantages(
    [tree],
    { kind: 'dr_grpo', shaping: [{ kind: 'ace' }, { kind: 'entropy' }] },
    inputs,
  );
  // entropy first: −0.5 + min(0.2, 0.25) = −0.3, then ·f; ace first: −0.5·f, then + min(0.2, 0.5f/2) = +0.2
  nearAll(entropyFirst[1].tokenAdvantages!, [-0.3 * f]);
  nearAll(aceFirst[1].tokenAdvantages!, [-0.5 * f + 0.2]);
  nearAll(entropyFirst[0].tokenAdvantages!, [0.7]);
});

test('options: defaults, bounds and unknown kinds are rejected with the field path', () => {
  const o = advantagesFromConfig({ shaping: [{ kind: 'novelty' }, { kind: 'entropy' }, { kind: 'ace' }] });
  assert.deepEqual(o.shaping, [
    { kind: 'novelty', lambda: 2.5, clip: 0.5, correctReward: 1 },
    { kind: 'entropy', alpha: 0.4, kappa: 2 },
    { kind: 'ace', alpha: 1, normalize: 'sum' },
  ]);
  assert.deepEqual(advantagesFromConfig({}).shaping, []);
  assert.throws(
    () => advantagesFromConfig({ shaping: [{ kind: 'entropy', kappa: 0.5 }] }),
    (e: unknown) => e instanceof ConfigError && e.path === 'optimize.advantage.shaping.0.kappa',
  );
  assert.throws(
    () => advantagesFromConfig({ shaping: [{ kind: 'novelty' }, { kind: 'curiosity' }] }),
    (e: unknown) => e instanceof ConfigError && e.path === 'optimize.advantage.shaping.1.kind',
  );
  assert.throws(
    () => advantagesFromConfig({ shaping: [{ kind: 'ace', alpa: 1 }] }),
    (e: unknown) => e instanceof ConfigError && e.path === 'optimize.advantage.shaping.0.alpa',
  );
});

test('the main job is unchanged: examples/arith-treepo.yaml resolves to no shaping and the same advantages', () => {
  const config = loadConfig('examples/arith-treepo.yaml');
  assert.deepEqual(config.optimize.advantage.shaping, []);
  const t = createTree('m', 'i', [1]);
  const a = addNode(t, '0', { tokens: [2, 3], logprobs: [-0.5, -1], entropies: [1, 1] });
  const b = addNode(t, '0', { tokens: [4, 5], logprobs: [-2, -0.1], entropies: [1, 1] });
  for (const [parent, reward] of [
    [a.id, 1],
    [a.id, 0],
    [b.id, 0],
    [b.id, 0],
  ] as const)
    addNode(t, parent, { tokens: [6], logprobs: [-1], entropies: [1], finishReason: 'stop' }).reward = reward;
  const withConfig = computeAdvantages([t], config.optimize.advantage);
  const before = computeAdvantages([t], { kind: 'tree', level: 'segment' });
  assert.deepEqual(withConfig, before);
  assert.deepEqual(computeAdvantages([t], { ...config.optimize.advantage, shaping: [] }), before);
  // …and the comparison can tell: one shaping term changes them
  const shaped = computeAdvantages([t], { ...config.optimize.advantage, shaping: [{ kind: 'entropy' }] });
  assert.notDeepEqual(shaped, before);
});

test('requestEntropy: every request asks for entropies; a sampler without them is a ConfigError', async () => {
  const seen: SampleRequest[] = [];
  const sampler: Sampler = {
    specificationVersion: 'arbor.sampler.v1',
    capabilities: { entropy: true, topLogprobs: false, forcedTokens: false, cacheHandles: false, prefixCaching: false },
    sample: async (requests) => {
      seen.push(...requests);
      return [];
    },
    release: () => undefined,
    weightVersion: () => 7,
  };
  const wrapped = requestEntropy(sampler);
  await wrapped.sample([{ tokens: [1], n: 2, maxTokens: 3 }]);
  assert.equal(seen[0].returnEntropy, true);
  assert.equal(wrapped.weightVersion(), 7);
  assert.throws(
    () => requestEntropy({ ...sampler, capabilities: { ...sampler.capabilities, entropy: false } }),
    (e: unknown) => e instanceof ConfigError && /entropy/.test(e.message),
  );
});

test(
  'a 2-step arbor train with novelty, entropy and ace on records entropies and trains',
  { timeout: 240_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-shaping-'));
    try {
      const out = join(root, 'run');
      const config = parseConfig({
        run: {
          name: 'shaping',
          outDir: out,
          seed: 5,
          steps: 2,
          promptsPerStep: 4,
          evalEvery: 0,
          evalCount: 10,
          evalPassK: 0,
          checkpointEvery: 0,
          logTreesEvery: 1,
          trainItems: 100,
        },
        task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
        model: { dModel: 32, nLayers: 1, nHeads: 2, dFF: 64, contextLength: 32, tieEmbeddings: false },
        sft: { steps: 40, batchSize: 16, learningRate: 0.01, examples: 200, checkpoint: join(root, 'sft') },
        sampling: { maxResponseTokens: 8 },
        generate: { kind: 'iid', groupSize: 4 },
        optimize: {
          advantage: { kind: 'grpo', shaping: [{ kind: 'novelty' }, { kind: 'entropy' }, { kind: 'ace' }] },
        },
        trainer: { learningRate: 0.001 },
      });
      await train(config, { quiet: true });
      const metrics = new RunDir(out).readMetrics().filter((m) => m.step > 0);
      assert.equal(metrics.length, 2);
      for (const m of metrics) assert.ok(Number.isFinite(m.loss), `loss ${m.loss}`);
      // the entropy term's input: every generated node carries one entropy per token
      const trees = readFileSync(join(out, 'trees', 'step-1.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((line) => treeFromJSON(line));
      const nodes = trees.flatMap((t) => Object.values(t.nodes).filter((n) => n.parent !== null));
      assert.ok(nodes.length >= 16, `${nodes.length} nodes`);
      for (const n of nodes) assert.equal(n.entropies?.length, n.tokens.length, `node ${n.id}`);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  },
);

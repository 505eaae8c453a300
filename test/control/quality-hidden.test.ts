/**
 * The quality head's hidden-state features (embedded engine): node features append the node's last
 * hidden state, a head reads what only the hidden state carries, the L2 penalty shrinks weights, the
 * producer's QualityStep asks the sampler for exactly what the head reads and refuses a saved head of
 * another width, and TreePO stores the returned states on its nodes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { ConfigError } from '../../src/core/errors.js';
import { addNode, createTree, leaves } from '../../src/core/tree.js';
import {
  auc,
  BASE_FEATURES,
  freshHead,
  hiddenFeatures,
  nodeFeatures,
  predict,
  qualityHeadSchema,
  train,
} from '../../src/control/quality-head.js';
import { QualityStep } from '../../src/control/quality-step.js';
import { pruneOptionsSchema } from '../../src/control/prune.js';
import { generatorFromConfig } from '../../src/generate/index.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';

const DEFAULTS = qualityHeadSchema.parse({});

test("node features: the six statistics, then the node's hidden state (zeros when it has none)", () => {
  const t = createTree('t', 'q', [1, 2]);
  const a = addNode(t, '0', { tokens: [3, 4], logprobs: [-1, -3], entropies: [0.5, 1.5], hidden: [0.25, -2, 7] });
  const b = addNode(t, a.id, { tokens: [5], logprobs: [-2] });
  // path 0.0: mean lp −2, min −3, last −3, mean entropy 1, length 2/10, prior 0.4
  assert.deepEqual(
    nodeFeatures(t, a.id, 10, 0.4),
    [-2, -3, -3, 1, 0.2, 0.4],
    'without hiddenSize: the base statistics only',
  );
  const all = hiddenFeatures(3, 0);
  assert.equal(all.width, 3);
  assert.deepEqual(nodeFeatures(t, a.id, 10, 0.4, all), [-2, -3, -3, 1, 0.2, 0.4, 0.25, -2, 7]);
  // path 0.0.0: lp [−1, −3, −2], entropies only on the first node (its two tokens)
  assert.deepEqual(
    nodeFeatures(t, b.id, 10, 0.4, all),
    [-2, -3, -2, 1, 0.3, 0.4, 0, 0, 0],
    'a node without a hidden state reads zeros',
  );
  assert.throws(
    () => nodeFeatures(t, a.id, 10, 0.4, hiddenFeatures(4, 0)),
    /hidden state of 3 entries, the head reads 4/,
  );
  assert.throws(() => train(freshHead(4), [[1, 2]], [1], DEFAULTS), /an example has 2 features, the head reads 10/);
});

test('hidden projection: dims < size is a fixed linear map to dims features; otherwise every entry', () => {
  const p = hiddenFeatures(8, 3);
  assert.equal(p.width, 3);
  const a = [1, -2, 0.5, 3, 0, 1, -1, 2];
  const b = [0.5, 1, 1, -1, 2, 0, 0.25, -3];
  const pa = p.map(a);
  const pb = p.map(b);
  const pab = p.map(a.map((x, i) => 2 * x + b[i]));
  pab.forEach((v, k) => assert.ok(Math.abs(v - (2 * pa[k] + pb[k])) < 1e-12, 'linear'));
  assert.deepEqual(p.map(undefined), [0, 0, 0]);
  assert.deepEqual(hiddenFeatures(8, 3).map(a), pa, 'the same projection in every run (fixed seed)');
  assert.ok(pa.some((v) => v !== 0));
  assert.equal(hiddenFeatures(8, 8).width, 8);
  assert.deepEqual(hiddenFeatures(8, 16).map(a), a, 'dims ≥ size: every entry as it is');
});

test('a head with hidden features learns a label only the hidden state carries; the base head cannot', () => {
  const rng = new Rng(11);
  const H = 8;
  const xs: number[][] = [];
  const ys: number[] = [];
  for (let i = 0; i < 600; i++) {
    const y = rng.next() < 0.5 ? 1 : 0;
    const base = Array.from({ length: BASE_FEATURES }, () => rng.normal());
    const hidden = Array.from({ length: H }, () => rng.normal());
    hidden[3] += y ? 1.5 : -1.5; // the outcome is written in one hidden direction
    xs.push(base.concat(hidden));
    ys.push(y);
  }
  const withHidden = freshHead(H);
  train(withHidden, xs.slice(0, 400), ys.slice(0, 400), DEFAULTS);
  const baseOnly = freshHead();
  train(
    baseOnly,
    xs.slice(0, 400).map((x) => x.slice(0, BASE_FEATURES)),
    ys.slice(0, 400),
    DEFAULTS,
  );
  const aucHidden = auc(
    xs.slice(400).map((x) => predict(withHidden, x)),
    ys.slice(400),
  )!;
  const aucBase = auc(
    xs.slice(400).map((x) => predict(baseOnly, x.slice(0, BASE_FEATURES))),
    ys.slice(400),
  )!;
  assert.ok(aucHidden > 0.9, `held-out AUC with the hidden state ${aucHidden}`);
  assert.ok(aucBase < 0.65, `held-out AUC of the base statistics ${aucBase} (they carry no signal here)`);
  // L2 shrinks the weights (default l2 is 0.001)
  const strong = freshHead(H);
  train(strong, xs.slice(0, 400), ys.slice(0, 400), { ...DEFAULTS, l2: 1 });
  const norm = (w: number[]) => Math.hypot(...w);
  assert.ok(
    norm(strong.w) < 0.5 * norm(withHidden.w),
    `|w| with l2 1: ${norm(strong.w)}, with 0.001: ${norm(withHidden.w)}`,
  );
});

const stepOptions = (hidden: boolean, samplerHiddenSize: number) => ({
  head: qualityHeadSchema.parse({ hidden }),
  prune: pruneOptionsSchema.parse({ kind: 'arrol' }),
  valueAllocation: false,
  maxResponseTokens: 16,
  samplerHiddenSize,
  samplerEntropy: true,
});

test('QualityStep: asks for hidden states only when the head reads them; a saved head of another width is a config error', () => {
  const rng = new Rng(1);
  const on = new QualityStep(undefined, stepOptions(true, 12), () => 0.5, rng);
  assert.deepEqual(on.hook?.wants, { entropy: true, hidden: true });
  assert.equal(on.state?.w.length, BASE_FEATURES + 12, 'hiddenDims 16 ≥ 12 entries: all of them');
  const projected = new QualityStep(undefined, stepOptions(true, 96), () => 0.5, rng);
  assert.equal(projected.state?.w.length, BASE_FEATURES + 16, '96 entries projected to the default 16');
  const off = new QualityStep(undefined, stepOptions(false, 12), () => 0.5, rng);
  assert.deepEqual(off.hook?.wants, { entropy: true, hidden: false });
  assert.equal(off.state?.w.length, BASE_FEATURES);
  const remote = new QualityStep(undefined, stepOptions(true, 0), () => 0.5, rng);
  assert.equal(remote.state?.w.length, BASE_FEATURES, 'a sampler without hidden states: base statistics');
  assert.throws(
    () => new QualityStep(freshHead(), stepOptions(true, 12), () => 0.5, rng),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.path === 'qualityHead.hidden' &&
      /reads 0 hidden-state features, this run's engine and config give 12/.test(e.message),
  );
  const none = new QualityStep(
    undefined,
    { ...stepOptions(true, 12), prune: pruneOptionsSchema.parse({ kind: 'none' }) },
    () => 0.5,
    rng,
  );
  assert.equal(none.hook, undefined, 'no value allocation and no pruning: no head');
});

test('treepo with a head that reads hidden states: every grown node holds the state of its last token, and the head learns from them', async () => {
  const m = NanoModel.createSync(
    {
      vocabSize: 23,
      dModel: 16,
      nLayers: 2,
      nHeads: 2,
      dFF: 24,
      contextLength: 96,
      tieEmbeddings: false,
      ropeTheta: 10000,
      normEps: 1e-5,
    },
    referenceKernels,
    3,
  );
  const sampler = new NanoSampler(m, { pageSize: 4 });
  const step = new QualityStep(
    undefined,
    { ...stepOptions(true, 16), head: qualityHeadSchema.parse({ warmup: 0 }) },
    () => 0.5,
    new Rng(2),
  );
  const g = generatorFromConfig({
    kind: 'treepo',
    groupSize: 4,
    segmentLength: 3,
    branchingFactor: 2,
    initialDivergence: 2,
  });
  const { trees } = await g.grow([{ item: { id: 'q', prompt: 'q', answer: '' }, promptTokens: [1, 2, 3] }], {
    sampler,
    rng: new Rng(5),
    step: 1,
    stopTokens: [2],
    maxResponseTokens: 9,
    temperature: 1,
    topP: 1,
    topK: 0,
    treeIdPrefix: 't',
    quality: step.hook,
  });
  const nodes = Object.values(trees[0].nodes).filter((n) => n.parent !== null);
  assert.ok(nodes.length >= 4);
  for (const n of nodes) {
    assert.equal(n.hidden?.length, 16, `node ${n.id} holds a hidden state`);
    assert.equal(n.entropies?.length, n.tokens.length, `node ${n.id} holds entropies (an entropy feature)`);
  }
  for (const leaf of leaves(trees[0])) leaf.reward = leaf.id.endsWith('0') ? 1 : 0;
  const info = step.learn(trees);
  assert.equal(info.head_examples, 0);
  assert.equal(step.state?.examples, nodes.length, 'every non-root node is an example');
  assert.ok(
    step.state!.w.slice(BASE_FEATURES).some((w) => w !== 0),
    'the hidden-state weights moved',
  );
});

/**
 * LATR, TreePO `distinct`, the identical-sibling metric and splitLeaf, on scripted and tiny real
 * samplers, with hand-computed trees.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { addNode, createTree, leaves, pathTo, responseTokens, splitLeaf, trajectory } from '../../src/core/tree.js';
import { ConfigError } from '../../src/core/errors.js';
import {
  branchPoint,
  editDistance,
  generatorFromConfig,
  siblingStats,
  type GenerateContext,
} from '../../src/generate/index.js';
import type { SampleRequest, SampleResult, Sampler } from '../../src/engine/types.js';
import { chooseToken } from '../../src/engine/model/sampling.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import { ScriptedTreeSampler } from './scripted.js';

const PROMPT = [1, 3];

/**
 * Responses are 5 5 5 5 5 then EOS (2). At response position 3 the model hesitates between 5 (0.5) and
 * 7 (0.4); elsewhere 5 has 0.9. A branch forced to 7 goes on with 7s (`diverge`) or with 5s.
 */
class HesitantSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities = {
    entropy: false,
    topLogprobs: true,
    forcedTokens: true,
    cacheHandles: false,
    prefixCaching: false,
  };
  requests: SampleRequest[][] = [];
  constructor(readonly diverge: boolean) {}
  weightVersion(): number {
    return 0;
  }
  release(): void {}
  async sample(requests: SampleRequest[]): Promise<SampleResult[]> {
    this.requests.push(requests);
    return requests.map((r) => {
      const completions = Array.from({ length: r.n ?? 1 }, (_, c) => {
        const response = r.tokens.slice(PROMPT.length);
        const tokens: number[] = [];
        const logprobs: number[] = [];
        const top: Array<Array<[number, number]>> = [];
        let finishReason: 'stop' | 'length' = 'length';
        while (tokens.length < r.maxTokens) {
          const pos = response.length + tokens.length;
          let t = pos === 5 ? 2 : this.diverge && [...response, ...tokens].includes(7) ? 7 : 5;
          if (tokens.length === 0 && r.forcedTokens) t = r.forcedTokens[c];
          const dist: Array<[number, number]> =
            pos === 3
              ? [
                  [5, Math.log(0.5)],
                  [7, Math.log(0.4)],
                ]
              : [
                  [t, Math.log(0.9)],
                  [9, Math.log(0.1)],
                ];
          tokens.push(t);
          logprobs.push(dist.find(([k]) => k === t)?.[1] ?? Math.log(0.1));
          top.push(dist);
          if (t === 2) {
            finishReason = 'stop';
            break;
          }
        }
        return { tokens, logprobs, finishReason, topLogprobs: r.topLogprobs ? top : undefined };
      });
      return {
        completions,
        usage: {
          promptTokensComputed: r.tokens.length,
          prefixTokensReused: 0,
          tokensDecoded: completions.reduce((a, c) => a + c.tokens.length, 0),
        },
        weightVersion: 0,
      };
    });
  }
}

const ctx = (sampler: Sampler, maxResponseTokens = 12): GenerateContext => ({
  sampler,
  rng: new Rng(1),
  step: 1,
  stopTokens: [2],
  maxResponseTokens,
  temperature: 1,
  topP: 1,
  topK: 0,
  treeIdPrefix: 't',
});
const input = { item: { id: 'q', prompt: 'q', answer: '' }, promptTokens: PROMPT };

test('latr branch rule: runner-up above tauAbs and within tauRel of the top token', () => {
  const c = {
    tokens: [5, 5, 5],
    logprobs: [0, 0, 0],
    finishReason: 'length' as const,
    topLogprobs: [
      [
        [5, Math.log(0.9)],
        [6, Math.log(0.1)],
      ],
      [
        [5, Math.log(0.5)],
        [6, Math.log(0.3)],
      ],
      [
        [5, Math.log(0.45)],
        [6, Math.log(0.4)],
      ],
    ] as Array<Array<[number, number]>>,
  };
  assert.equal(branchPoint(c, { tauAbs: 0.15, tauRel: 0.25 }), 1, 'position 1: 0.3 > 0.15 and 0.5 − 0.3 < 0.25');
  assert.equal(
    branchPoint(c, { tauAbs: 0.35, tauRel: 0.25 }),
    2,
    'position 2 only when the runner-up must exceed 0.35',
  );
  assert.equal(branchPoint(c, { tauAbs: 0.15, tauRel: 0.01 }), undefined);
  assert.equal(editDistance([7, 7, 2], [5, 5, 2]), 2 / 3);
  assert.equal(editDistance([1, 2, 3], [1, 3]), 1 / 3);
  assert.equal(editDistance([], []), 0);
});

test('latr forks at the hesitation with the forced runner-up, splitting the node; a diverging branch is kept', async () => {
  const s = new HesitantSampler(true);
  const { trees, stats } = await generatorFromConfig({
    kind: 'latr',
    groupSize: 2,
    segmentLength: 8,
    lookahead: 8,
  }).grow([input], ctx(s));
  const t = trees[0];
  assert.deepEqual(t.meta?.latr, { forks: 1, pruned: 0 });
  const ls = leaves(t);
  assert.deepEqual(
    ls.map((l) => responseTokens(t, l.id)),
    [
      [5, 5, 5, 5, 5, 2],
      [5, 5, 5, 7, 7, 2],
    ],
  );
  // the shared prefix 5 5 5 is one node; both leaves hang under it
  assert.deepEqual(
    ls.map((l) => pathTo(t, l.id).map((n) => n.tokens)),
    [
      [PROMPT, [5, 5, 5], [5, 5, 2]],
      [PROMPT, [5, 5, 5], [7, 7, 2]],
    ],
  );
  assert.deepEqual(s.requests[1][0].forcedTokens, [7]);
  assert.deepEqual(
    s.requests[1][0].tokens,
    [...PROMPT, 5, 5, 5],
    'the branch is decoded from the prefix before the hesitation',
  );
  assert.equal(stats.trajectories, 2);
  assert.equal(stats.tokensDecoded, 6 + 3);
  // log-probs travel with the split: the tail keeps its tokens' log-probs
  assert.deepEqual(
    trajectory(t, ls[0].id).logprobs.map((x) => Math.round(Math.exp(x) * 10) / 10),
    [0.9, 0.9, 0.9, 0.5, 0.9, 0.9],
  );
});

test('latr prunes a branch that rejoins its path and fills the group with plain samples', async () => {
  const s = new HesitantSampler(false);
  const { trees, stats } = await generatorFromConfig({
    kind: 'latr',
    groupSize: 2,
    segmentLength: 8,
    lookahead: 8,
  }).grow([input], ctx(s));
  const t = trees[0];
  assert.deepEqual(t.meta?.latr, { forks: 0, pruned: 1 }, '7 5 2 vs 5 5 2: distance 1/3 < 0.4');
  assert.deepEqual(
    leaves(t).map((l) => responseTokens(t, l.id)),
    [
      [5, 5, 5, 5, 5, 2],
      [5, 5, 5, 5, 5, 2],
    ],
  );
  assert.ok(
    leaves(t).every((l) => l.parent === '0'),
    'the fill sample starts at the prompt',
  );
  assert.equal(stats.tokensDecoded, 6 + 3 + 6, 'the pruned lookahead was decoded and is counted');
  assert.deepEqual(siblingStats(trees), { pairs: 1, identical: 1 });
});

test('latr refuses partial rollouts and samplers without forced tokens, naming the key', async () => {
  const g = generatorFromConfig({ kind: 'latr' });
  await assert.rejects(
    g.grow([input], { ...ctx(new HesitantSampler(true)), stopAfterTrees: 1 }),
    (e: unknown) => e instanceof ConfigError && e.path === 'control',
  );
  await assert.rejects(
    g.grow([input], ctx(new ScriptedTreeSampler(0.2))),
    (e: unknown) => e instanceof ConfigError && e.path === 'generate.kind',
  );
});

test('siblingStats counts identical first segments over every pair of children', () => {
  const t = createTree('a', 'a', [1]);
  for (const tokens of [[5, 6], [5, 6], [7], [5, 6]]) addNode(t, '0', { tokens, finishReason: 'stop' });
  const u = createTree('b', 'b', [1]);
  const mid = addNode(u, '0', { tokens: [3] });
  addNode(u, mid.id, { tokens: [4], finishReason: 'stop' });
  addNode(u, mid.id, { tokens: [8], finishReason: 'stop' });
  // a: 6 pairs, 3 identical ([5,6] three times); b: 1 pair, different; a single child makes no pair
  assert.deepEqual(siblingStats([t, u]), { pairs: 7, identical: 3 });
});

test('splitLeaf moves the tail, its log-probs and finish reason into a child', () => {
  const t = createTree('a', 'a', [1]);
  const n = addNode(t, '0', { tokens: [4, 5, 6], logprobs: [-1, -2, -3], finishReason: 'stop' });
  const tail = splitLeaf(t, n.id, 1);
  assert.deepEqual([n.tokens, n.logprobs, n.finishReason], [[4], [-1], null]);
  assert.deepEqual([tail.tokens, tail.logprobs, tail.finishReason, tail.parent], [[5, 6], [-2, -3], 'stop', n.id]);
  assert.throws(() => splitLeaf(t, n.id, 1), /only a leaf can be split/);
  assert.throws(() => splitLeaf(t, tail.id, 2), /outside \(0, 2\)/);
});

test("sampling without replacement: an excluded token is never drawn, its log-prob stays the full distribution's", () => {
  const logits = new Float32Array([0, 5, 0, 0]);
  const full = chooseToken(logits, 0, 4, new Rng(1), { temperature: 1, topP: 1, topK: 0, topLogprobs: 0 });
  for (let s = 0; s < 50; s++) {
    const c = chooseToken(logits, 0, 4, new Rng(s), {
      temperature: 1,
      topP: 1,
      topK: 0,
      topLogprobs: 0,
      exclude: new Set([1]),
    });
    assert.notEqual(c.token, 1);
    assert.ok(Math.abs(c.logprob - (0 - Math.log(3 + Math.exp(5)))) < 1e-9);
  }
  assert.equal(full.token, 1);
  const greedy = chooseToken(logits, 0, 4, new Rng(1), {
    temperature: 0,
    topP: 1,
    topK: 0,
    topLogprobs: 0,
    exclude: new Set([1]),
  });
  assert.equal(greedy.token, 0, 'greedy takes the best remaining token');
});

test('treepo distinct: the copies of a path start with different tokens on the embedded sampler', async () => {
  const m = NanoModel.createSync(
    {
      vocabSize: 20,
      dModel: 16,
      nLayers: 1,
      nHeads: 2,
      dFF: 16,
      contextLength: 64,
      tieEmbeddings: true,
      ropeTheta: 10000,
      normEps: 1e-5,
    },
    referenceKernels,
    1,
  );
  const grow = (distinct: boolean) =>
    generatorFromConfig({
      kind: 'treepo',
      groupSize: 8,
      segmentLength: 4,
      branchingFactor: 2,
      initialDivergence: 4,
      distinct,
    }).grow([input], { ...ctx(new NanoSampler(m), 16), temperature: 0.02, stopTokens: [] });
  const plain = await grow(false);
  const distinct = await grow(true);
  const firstTokens = (t: (typeof plain.trees)[0], id: string) => t.nodes[id].children.map((c) => t.nodes[c].tokens[0]);
  for (const node of Object.values(distinct.trees[0].nodes)) {
    const batch = node.children.length;
    if (batch >= 2)
      assert.equal(
        new Set(firstTokens(distinct.trees[0], node.id)).size,
        batch,
        `children of ${node.id} start with different tokens`,
      );
  }
  assert.equal(siblingStats(distinct.trees).identical, 0);
  assert.ok(
    siblingStats(plain.trees).identical > 0,
    'a cold sampler (temperature 0.02) repeats itself without distinct',
  );
  await assert.rejects(
    generatorFromConfig({ kind: 'treepo', distinct: true }).grow([input], ctx(new ScriptedTreeSampler(0.2))),
    (e: unknown) => e instanceof ConfigError && e.path === 'generate.distinct',
  );
});

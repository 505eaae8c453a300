import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Rng, hashString } from '../../src/core/rng.js';
import {
  generatedTokenCount,
  isComplete,
  leaves,
  responseTokens,
  trajectory,
  type RolloutTree,
} from '../../src/core/tree.js';
import {
  generatorFromConfig,
  type GenerateContext,
  type GenerateInput,
  type Generator,
} from '../../src/generate/index.js';
import type { SampleCompletion, SampleOptions, SampleRequest, SampleResult, Sampler } from '../../src/engine/types.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import { ScriptedTreeSampler } from './scripted.js';

const inputs: GenerateInput[] = Array.from({ length: 6 }, (_, i) => ({
  item: { id: `p${i}`, prompt: `p${i}`, answer: '' },
  promptTokens: [1, 10 + i, 11],
}));

function context(sampler: Sampler, extra: Partial<GenerateContext> = {}): GenerateContext {
  return {
    sampler,
    rng: new Rng(1),
    step: 1,
    stopTokens: [2],
    maxResponseTokens: 24,
    temperature: 1,
    topP: 1,
    topK: 0,
    treeIdPrefix: 't',
    ...extra,
  };
}

const clone = (trees: RolloutTree[]): RolloutTree[] => structuredClone(trees);

/**
 * A sampler whose next token is a function of the context only (the first token of continuation i of
 * a request with n > 1 also mixes in i), so a sequence cut anywhere and continued from its context
 * goes on exactly as it would have. Token 2 (stop) comes only after `minStop` response tokens, so a
 * treepo tree's budget is fully spread before any path stops (no fallback, no random draws). It applies
 * `stopAfterGroups` like the embedded engine (cut at the step where the count-th group finished) and
 * can cut every continuation of its next call after `abortAfter` tokens (a cancellation).
 */
class MarkovSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities = {
    entropy: true,
    topLogprobs: false,
    forcedTokens: false,
    cacheHandles: true,
    prefixCaching: false,
  };
  version = 0;
  calls = 0;
  requestsSeen: SampleRequest[][] = [];
  abortAfter: number | undefined;
  readonly live = new Set<string>();
  private counter = 0;
  constructor(
    readonly promptLength = 3,
    readonly minStop = 12,
    readonly stopEvery = 5,
  ) {}
  weightVersion(): number {
    return this.version;
  }
  release(handles: string[]): void {
    for (const h of handles) this.live.delete(h);
  }
  async sample(requests: SampleRequest[], options: SampleOptions = {}): Promise<SampleResult[]> {
    this.calls++;
    this.requestsSeen.push(requests);
    const runs = requests.map((r) => Array.from({ length: r.n ?? 1 }, (_, i) => this.run(r, (r.n ?? 1) > 1 ? i : -1)));
    const cut = Math.min(this.abortAfter ?? Infinity, stopStep(runs, options.stopAfterGroups));
    this.abortAfter = undefined;
    return runs.map((completions, j) => {
      const out = completions.map((c) =>
        c.tokens.length > cut
          ? {
              tokens: c.tokens.slice(0, cut),
              logprobs: c.logprobs.slice(0, cut),
              entropies: c.entropies!.slice(0, cut),
              finishReason: 'abort' as const,
            }
          : c,
      );
      if (requests[j].retain) for (const c of out) this.live.add((c.cacheHandle = `h${++this.counter}`));
      const decoded = out.reduce((s, c) => s + c.tokens.length, 0);
      return {
        completions: out,
        usage: { promptTokensComputed: requests[j].tokens.length, prefixTokensReused: 0, tokensDecoded: decoded },
        weightVersion: this.version,
      };
    });
  }
  private run(r: SampleRequest, index: number): SampleCompletion {
    const context = r.tokens.slice();
    const c: SampleCompletion = { tokens: [], logprobs: [], entropies: [], finishReason: 'length' };
    while (c.tokens.length < r.maxTokens) {
      const h = hashString(`${context.join(',')}|${c.tokens.length === 0 ? index : -1}`);
      const stop =
        r.stopTokens?.includes(2) && context.length - this.promptLength >= this.minStop && h % this.stopEvery === 0;
      const token = stop ? 2 : 5 + ((h >>> 8) % 10);
      c.tokens.push(token);
      c.logprobs.push(-1 - (h % 100) / 100);
      c.entropies!.push((h % 7) / 7);
      context.push(token);
      if (stop) {
        c.finishReason = 'stop';
        break;
      }
    }
    return c;
  }
}

/** The embedded engine's stop rule on full runs: the step at which the count-th group had finished. */
function stopStep(runs: SampleCompletion[][], stop: SampleOptions['stopAfterGroups']): number {
  if (!stop) return Infinity;
  if (stop.count <= 0) return 0;
  const finish = new Map<number, number>();
  runs.forEach((cs, j) =>
    finish.set(stop.groupOf[j], Math.max(finish.get(stop.groupOf[j]) ?? 0, ...cs.map((c) => c.tokens.length))),
  );
  const steps = [...finish.values()].sort((a, b) => a - b);
  return stop.count <= steps.length ? steps[stop.count - 1] : Infinity;
}

/** Continue every incomplete tree of `trees` (in order); returns the continued trees and the call's stats. */
async function continueTrees(g: Generator, trees: RolloutTree[], ctx: GenerateContext) {
  const open = trees.map((tree, i) => ({ tree, i })).filter(({ tree }) => !isComplete(tree));
  const { trees: out, stats } = await g.grow(
    open.map(({ tree, i }) => ({ ...inputs[i], tree })),
    ctx,
  );
  return { open, out, stats };
}

test('iid: stopAfterTrees cuts the other trees; continuing them gives the uninterrupted trees exactly', async () => {
  const g = generatorFromConfig({ kind: 'iid', groupSize: 4 });
  const whole = await g.grow(inputs, context(new MarkovSampler(), { maxResponseTokens: 30 }));
  assert.ok(whole.trees.every(isComplete));
  const sampler = new MarkovSampler();
  const first = await g.grow(inputs, context(sampler, { maxResponseTokens: 30, stopAfterTrees: 2 }));
  const complete = first.trees.filter(isComplete);
  assert.ok(complete.length >= 2 && complete.length < inputs.length, `${complete.length} complete`);
  const aborted = first.trees.flatMap((t) => leaves(t).filter((l) => l.finishReason === 'abort'));
  const cut = aborted.map((l) => l.tokens.length);
  assert.ok(cut.length > 0 && cut.every((n) => n > 0), 'cut leaves keep what they decoded');
  assert.equal(first.stats.trajectories, 4 * complete.length);
  const { out, stats } = await continueTrees(g, first.trees, context(sampler, { maxResponseTokens: 30 }));
  assert.equal(stats.samplerCalls, 1);
  assert.equal(stats.trajectories, 4 * out.length);
  // one request per aborted leaf: prompt + its tokens, n = 1, the rest of the 30-token budget
  assert.equal(sampler.calls, 2);
  assert.equal(sampler.requestsSeen[1].length, cut.length);
  sampler.requestsSeen[1].forEach((r, k) => {
    assert.equal(r.n, 1);
    assert.equal(r.tokens.length, 3 + cut[k]);
    assert.equal(r.maxTokens, 30 - cut[k]);
  });
  const byId = new Map(out.map((t) => [t.id, t]));
  const final = first.trees.map((t) => byId.get(t.id) ?? t);
  assert.deepEqual(final, whole.trees);
  // a complete tree given again is returned unchanged, not re-counted, and costs no sampler call
  const again = await g.grow(
    [{ ...inputs[0], tree: structuredClone(final[0]) }],
    context(sampler, { maxResponseTokens: 30 }),
  );
  assert.deepEqual(again.trees[0], final[0]);
  assert.equal(again.stats.trajectories, 0);
  assert.equal(sampler.calls, 2);
});

test('treepo: stopping between rounds and continuing from meta.pending gives the uninterrupted trees exactly', async () => {
  const g = generatorFromConfig({
    kind: 'treepo',
    groupSize: 6,
    segmentLength: 4,
    branchingFactor: 2,
    initialDivergence: 2,
  });
  const whole = await g.grow(inputs, context(new MarkovSampler(), { maxResponseTokens: 32 }));
  const sampler = new MarkovSampler();
  const first = await g.grow(inputs, context(sampler, { maxResponseTokens: 32, stopAfterTrees: 2 }));
  const complete = first.trees.filter(isComplete);
  assert.ok(complete.length >= 2 && complete.length < inputs.length, `${complete.length} complete`);
  for (const t of first.trees) {
    const pending = t.meta?.pending as
      { live: Array<{ node: string; copies: number }>; finished: string[] } | undefined;
    if (isComplete(t)) assert.equal(pending, undefined);
    else {
      // the saved state is plain JSON: live paths hold the budget not yet spent (F + copies = G)
      assert.deepEqual(JSON.parse(JSON.stringify(pending)), pending);
      assert.equal(pending!.finished.length + pending!.live.reduce((s, l) => s + l.copies, 0), 6);
      assert.ok(pending!.live.every((l) => t.nodes[l.node] && t.nodes[l.node].finishReason === null));
    }
  }
  assert.equal(sampler.live.size, 0, 'KV handles are released, not kept across calls');
  const { out, stats } = await continueTrees(
    g,
    JSON.parse(JSON.stringify(first.trees)),
    context(sampler, { maxResponseTokens: 32 }),
  );
  assert.equal(stats.trajectories, 6 * out.length);
  for (const t of out) assert.ok(isComplete(t) && t.meta?.pending === undefined);
  const byId = new Map(out.map((t) => [t.id, t]));
  assert.deepEqual(
    first.trees.map((t) => byId.get(t.id) ?? t),
    whole.trees,
  );
  // stopAfterTrees 0: nothing is sampled; every tree waits with its first-step copies
  const none = await g.grow(inputs.slice(0, 2), context(new MarkovSampler(), { stopAfterTrees: 0 }));
  assert.equal(none.stats.samplerCalls, 0);
  assert.deepEqual(
    none.trees.map((t) => t.meta?.pending),
    [
      { live: [{ node: '0', copies: 2 }], finished: [] },
      { live: [{ node: '0', copies: 2 }], finished: [] },
    ],
  );
});

test('treepo: a round cut by cancellation keeps its partial segments and resumes them in place', async () => {
  const g = generatorFromConfig({
    kind: 'treepo',
    groupSize: 6,
    segmentLength: 4,
    branchingFactor: 2,
    initialDivergence: 2,
  });
  const whole = await g.grow(inputs.slice(0, 3), context(new MarkovSampler(), { maxResponseTokens: 32 }));
  const sampler = new MarkovSampler();
  sampler.abortAfter = 3;
  const first = await g.grow(inputs.slice(0, 3), context(sampler, { maxResponseTokens: 32 }));
  assert.equal(first.stats.samplerCalls, 1, 'no round after a cancelled one');
  assert.equal(first.stats.trajectories, 0);
  for (const t of first.trees) {
    assert.equal(isComplete(t), false);
    assert.deepEqual(
      leaves(t).map((l) => [l.id, l.finishReason, l.tokens.length]),
      [
        ['0.0', 'abort', 3],
        ['0.1', 'abort', 3],
      ],
    );
    assert.deepEqual(t.meta?.pending, {
      live: [
        { node: '0.0', copies: 1 },
        { node: '0.1', copies: 1 },
      ],
      finished: [],
    });
  }
  const before = clone(first.trees);
  const { out } = await continueTrees(g, first.trees, context(sampler, { maxResponseTokens: 32 }));
  assert.equal(sampler.calls > 2, true);
  // the cut segment was continued in place (4 = L tokens, the first 3 from before the cut): same trees
  out.forEach((t, i) => assert.deepEqual(t.nodes['0.0'].tokens.slice(0, 3), before[i].nodes['0.0'].tokens));
  assert.deepEqual(out, whole.trees);
});

const nano = () =>
  NanoModel.createSync(
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

/**
 * Grow with stopAfterTrees = 2 on the embedded engine, then continue the rest under weight version 1
 * (`before` is the first call's trees as they were; the continuation changes them in place).
 */
async function abortAndContinue(g: Generator) {
  const model = nano();
  const sampler = new NanoSampler(model);
  const ctx = (extra: Partial<GenerateContext>) => context(sampler, { stopTokens: [2, 3, 4], ...extra });
  const first = await g.grow(inputs, ctx({ stopAfterTrees: 2 }));
  const before = clone(first.trees);
  model.weightVersion++; // new weights: stale KV handles are dropped, tokens are tagged with version 1
  const { open, out, stats } = await continueTrees(g, first.trees, ctx({ rng: new Rng(2) }));
  return { first, before, open, out, stats, sampler };
}

/** Every node of `before` is still there and its tokens are a prefix of what it holds now. */
function assertNothingLost(before: RolloutTree, after: RolloutTree): void {
  for (const [id, n] of Object.entries(before.nodes)) {
    const now = after.nodes[id];
    assert.ok(now, `${after.id}: node ${id} kept`);
    assert.deepEqual(now.tokens.slice(0, n.tokens.length), n.tokens, `${after.id}: node ${id} keeps its tokens`);
    assert.deepEqual(now.logprobs.slice(0, n.tokens.length), n.logprobs);
  }
}

test('iid on the embedded engine: stop after 2 trees, continue the rest under new weights, nothing lost', async () => {
  const g = generatorFromConfig({ kind: 'iid', groupSize: 4 });
  const { first, before, open, out, stats } = await abortAndContinue(g);
  const complete = before.filter(isComplete).length;
  assert.ok(complete >= 2, `${complete} complete`);
  assert.ok(open.length >= 1, 'some trees were cut');
  assert.equal(first.stats.trajectories, 4 * complete);
  assert.equal(
    first.stats.tokensDecoded,
    before.reduce((s, t) => s + generatedTokenCount(t), 0),
  );
  let mixed = 0;
  out.forEach((t, k) => {
    const i = open[k].i;
    assert.equal(t.id, before[i].id, 'a continued tree keeps its id');
    assert.ok(isComplete(t));
    assert.equal(leaves(t).length, 4);
    assertNothingLost(before[i], t);
    for (const leaf of leaves(before[i])) {
      const trajectoryAfter = trajectory(t, leaf.id);
      assert.deepEqual(trajectoryAfter.tokens.slice(0, leaf.tokens.length), responseTokens(before[i], leaf.id));
      if (leaf.finishReason !== 'abort') assert.deepEqual(t.nodes[leaf.id], leaf, 'finished leaves are untouched');
      else if (leaf.tokens.length > 0 && trajectoryAfter.tokens.length > leaf.tokens.length) {
        mixed++;
        assert.deepEqual([...new Set(trajectoryAfter.weightVersions)], [0, 1]);
        assert.deepEqual(
          trajectoryAfter.weightVersions.slice(0, leaf.tokens.length),
          leaf.tokens.map(() => 0),
        );
      }
    }
  });
  assert.ok(mixed > 0, 'some continued leaf holds tokens of both weight versions');
  // tokens before the cut + tokens decoded after it = tokens of the continued trees
  const tokensBefore = open.reduce((s, { i }) => s + generatedTokenCount(before[i]), 0);
  assert.equal(
    tokensBefore + stats.tokensDecoded,
    out.reduce((s, t) => s + generatedTokenCount(t), 0),
  );
  assert.equal(stats.trajectories, 4 * out.length);
});

test('treepo on the embedded engine: stop after 2 trees, continue the rest under new weights, nothing lost', async () => {
  const g = generatorFromConfig({
    kind: 'treepo',
    groupSize: 6,
    segmentLength: 4,
    branchingFactor: 2,
    initialDivergence: 2,
  });
  const { first, before, open, out, stats, sampler } = await abortAndContinue(g);
  const complete = before.filter(isComplete).length;
  assert.ok(complete >= 2 && open.length >= 1, `${complete} complete, ${open.length} open`);
  assert.equal(first.stats.trajectories, 6 * complete);
  let mixed = 0;
  out.forEach((t, k) => {
    const i = open[k].i;
    assert.equal(t.id, before[i].id);
    assert.ok(isComplete(t) && t.meta?.pending === undefined);
    assert.equal(leaves(t).length, 6);
    assertNothingLost(before[i], t);
    const pending = before[i].meta!.pending as { live: Array<{ node: string }>; finished: string[] };
    assert.ok(
      pending.finished.every((id) => leaves(t).some((l) => l.id === id)),
      'finished leaves stay leaves',
    );
    for (const leaf of leaves(t)) {
      const versions = new Set(trajectory(t, leaf.id).weightVersions);
      if (versions.size === 2) mixed++;
      if (!before[i].nodes[leaf.id]) assert.ok(versions.has(1), 'new leaves end with version-1 tokens');
    }
  });
  assert.ok(mixed > 0, 'some leaf grew under both weight versions');
  const tokensBefore = open.reduce((s, { i }) => s + generatedTokenCount(before[i]), 0);
  assert.equal(
    tokensBefore + stats.tokensDecoded,
    out.reduce((s, t) => s + generatedTokenCount(t), 0),
  );
  assert.equal(stats.trajectories, 6 * out.length);
  assert.equal(sampler.retainedCount, 0);
  assert.equal(sampler.cache.pagesInUse, 0);
});

test('treepo on the embedded engine: an abortProbe cancellation leaves continuable trees', async () => {
  const g = generatorFromConfig({
    kind: 'treepo',
    groupSize: 4,
    segmentLength: 6,
    branchingFactor: 2,
    initialDivergence: 2,
  });
  let checks = 0;
  let cancel = true;
  const sampler = new NanoSampler(nano(), { abortProbe: () => cancel && ++checks > 2 });
  const first = await g.grow(inputs.slice(0, 2), context(sampler, { stopTokens: [] }));
  assert.equal(first.stats.samplerCalls, 1);
  for (const t of first.trees)
    assert.deepEqual(
      leaves(t).map((l) => [l.finishReason, l.tokens.length]),
      [
        ['abort', 2],
        ['abort', 2],
      ],
    );
  cancel = false;
  const before = clone(first.trees);
  const { trees } = await g.grow(
    first.trees.map((tree, i) => ({ ...inputs[i], tree })),
    context(sampler, { stopTokens: [] }),
  );
  trees.forEach((t, i) => {
    assert.ok(isComplete(t));
    assert.equal(leaves(t).length, 4);
    assertNothingLost(before[i], t);
    assert.equal(t.nodes['0.0'].tokens.length, 6, 'the cut segment was completed to L tokens in place');
    assert.ok(
      leaves(t).every((l) => responseTokens(t, l.id).length === 24),
      'no stop token: every path runs to the limit',
    );
  });
});

const canon = (x: unknown): unknown =>
  Array.isArray(x)
    ? x.map(canon)
    : x && typeof x === 'object'
      ? Object.fromEntries(
          Object.keys(x)
            .sort()
            .map((k) => [k, canon((x as Record<string, unknown>)[k])]),
        )
      : x;
const digest = (x: unknown) =>
  createHash('sha256')
    .update(JSON.stringify(canon(x)))
    .digest('hex')
    .slice(0, 16);

test('without stopAfterTrees, iid and treepo grow the same trees as before partial rollouts existed', async () => {
  // digests of (trees, stats, requests) recorded with the generators as they were before partial rollouts
  const cases = [
    { cfg: { kind: 'iid', groupSize: 6 }, p: 0.1, seed: 1, expected: 'bea02be76552c4ef' },
    {
      cfg: {
        kind: 'treepo',
        groupSize: 8,
        segmentLength: 4,
        branchingFactor: 2,
        initialDivergence: { min: 2, max: 4 },
      },
      p: 0.1,
      seed: 5,
      expected: '1e159b4a61c76b59',
    },
    {
      cfg: {
        kind: 'treepo',
        groupSize: 8,
        segmentLength: 3,
        branchingFactor: 2,
        initialDivergence: 2,
        allocation: 'low_prob',
      },
      p: 0.6,
      seed: 3,
      expected: '7add27a3f9a56a09',
    },
  ];
  for (const { cfg, p, seed, expected } of cases) {
    const s = new ScriptedTreeSampler(p);
    const { trees, stats } = await generatorFromConfig(cfg).grow(inputs.slice(0, 5), {
      ...context(s, { rng: new Rng(seed), maxResponseTokens: 40 }),
    });
    assert.equal(digest([trees, { ...stats, wallMs: 0 }, s.requestsSeen]), expected, JSON.stringify(cfg));
    assert.ok(trees.every((t) => isComplete(t) && t.meta?.pending === undefined));
  }
  // embedded engine: same trees twice, every tree complete with G leaves
  for (const cfg of [
    { kind: 'iid', groupSize: 4 },
    { kind: 'treepo', groupSize: 6, segmentLength: 4, branchingFactor: 2, initialDivergence: 2 },
  ]) {
    const run = () =>
      generatorFromConfig(cfg).grow(inputs, context(new NanoSampler(nano()), { stopTokens: [2, 3, 4] }));
    const [a, b] = [await run(), await run()];
    assert.deepEqual(a.trees, b.trees);
    assert.ok(a.trees.every((t) => isComplete(t) && leaves(t).length === cfg.groupSize));
    assert.equal(a.stats.trajectories, inputs.length * cfg.groupSize);
    assert.equal(
      a.stats.tokensDecoded,
      a.trees.reduce((s, t) => s + generatedTokenCount(t), 0),
    );
  }
});

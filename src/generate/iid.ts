/**
 * `iid` (GRPO baseline): one sampler request per prompt with n = G and the full response length;
 * all prompts of the batch in one sample() call. The tree is a star: root + G leaves.
 * Partial rollouts: with `stopAfterTrees` the sampler stops once that many trees have all their
 * leaves finished, and the other leaves end `abort` with what they decoded; a later call continues
 * each aborted leaf in place (same node, newer weight version recorded per token) until it finishes.
 */
import { addNode, appendToNode, createTree, isComplete, leaves, responseTokens, type FinishReason, type RolloutTree } from '../core/tree.js';
import type { SampleCompletion, SampleOptions, SampleRequest } from '../engine/types.js';
import { addUsage, emptyStats, type GenerateContext, type GenerateInput, type Generator } from './types.js';

export interface IidOptions {
  kind: 'iid';
  /** G: samples per prompt. */
  groupSize: number;
}

/** What each request of the call grows: G fresh leaves under a root, or one aborted leaf continued. */
type Target = { tree: number; leafId?: string };

export function iidGenerator(options: IidOptions): Generator {
  return {
    kind: 'iid',
    groupSize: options.groupSize,
    async grow(inputs: GenerateInput[], ctx: GenerateContext) {
      const started = Date.now();
      const stats = emptyStats();
      const trees: RolloutTree[] = inputs.map((input, i) => input.tree ?? createTree(`${ctx.treeIdPrefix}${i}`, input.item.id, input.promptTokens, { generator: 'iid' }));
      const base = { temperature: ctx.temperature, topP: ctx.topP, topK: ctx.topK, stopTokens: ctx.stopTokens };
      const requests: SampleRequest[] = [];
      const targets: Target[] = [];
      inputs.forEach((input, i) => {
        if (!input.tree) {
          requests.push({ ...base, tokens: input.promptTokens, n: options.groupSize, maxTokens: ctx.maxResponseTokens, seed: ctx.rng.nextU32(), affinityKey: trees[i].id });
          targets.push({ tree: i });
          return;
        }
        for (const leaf of leaves(input.tree).filter((l) => l.finishReason === 'abort')) {
          const done = responseTokens(input.tree, leaf.id);
          if (done.length >= ctx.maxResponseTokens) {
            leaf.finishReason = 'length';
            continue;
          }
          requests.push({ ...base, tokens: input.promptTokens.concat(done), n: 1, maxTokens: ctx.maxResponseTokens - done.length, seed: ctx.rng.nextU32(), affinityKey: trees[i].id });
          targets.push({ tree: i, leafId: leaf.id });
        }
      });
      const sampleOptions: SampleOptions = { signal: ctx.signal };
      if (ctx.stopAfterTrees !== undefined && ctx.stopAfterTrees > 0) sampleOptions.stopAfterGroups = { groupOf: targets.map((t) => t.tree), count: ctx.stopAfterTrees };
      const results = requests.length ? await ctx.sampler.sample(requests, sampleOptions) : [];
      if (requests.length) stats.samplerCalls++;
      results.forEach((result, j) => {
        addUsage(stats, result.usage);
        const { tree, leafId } = targets[j];
        for (const c of result.completions) {
          const segment = { tokens: c.tokens, logprobs: c.logprobs, entropies: c.entropies, finishReason: finishOf(c), weightVersion: result.weightVersion };
          if (leafId === undefined) addNode(trees[tree], '0', segment);
          else appendToNode(trees[tree], leafId, segment);
        }
      });
      stats.trajectories = trees.filter((t) => isComplete(t)).reduce((s, t) => s + leaves(t).length, 0);
      stats.wallMs = Date.now() - started;
      return { trees, stats };
    },
  };
}

function finishOf(c: SampleCompletion): FinishReason {
  return c.finishReason === 'stop' ? 'stop' : c.finishReason === 'abort' ? 'abort' : 'length';
}

/**
 * `iid` (GRPO baseline): one sampler request per prompt with n = G and the full response length;
 * all prompts of the batch in one sample() call. The tree is a star: root + G leaves.
 */
import { addNode, createTree, type RolloutTree } from '../core/tree.js';
import type { SampleRequest } from '../engine/types.js';
import { addUsage, emptyStats, type GenerateContext, type GenerateInput, type Generator } from './types.js';

export interface IidOptions {
  kind: 'iid';
  /** G: samples per prompt. */
  groupSize: number;
}

export function iidGenerator(options: IidOptions): Generator {
  return {
    kind: 'iid',
    groupSize: options.groupSize,
    async grow(inputs: GenerateInput[], ctx: GenerateContext) {
      const started = Date.now();
      const stats = emptyStats();
      const trees: RolloutTree[] = inputs.map((input, i) => createTree(`${ctx.treeIdPrefix}${i}`, input.item.id, input.promptTokens, { generator: 'iid' }));
      const requests: SampleRequest[] = inputs.map((input, i) => ({
        tokens: input.promptTokens,
        n: options.groupSize,
        maxTokens: ctx.maxResponseTokens,
        temperature: ctx.temperature,
        topP: ctx.topP,
        topK: ctx.topK,
        stopTokens: ctx.stopTokens,
        seed: ctx.rng.nextU32(),
        affinityKey: trees[i].id,
      }));
      const results = await ctx.sampler.sample(requests, { signal: ctx.signal });
      stats.samplerCalls++;
      results.forEach((result, i) => {
        addUsage(stats, result.usage);
        for (const c of result.completions) {
          addNode(trees[i], '0', {
            tokens: c.tokens,
            logprobs: c.logprobs,
            entropies: c.entropies,
            finishReason: c.finishReason === 'stop' ? 'stop' : c.finishReason === 'abort' ? 'abort' : 'length',
            weightVersion: result.weightVersion,
          });
        }
      });
      stats.trajectories = trees.reduce((s, t) => s + t.nodes['0'].children.length, 0);
      stats.wallMs = Date.now() - started;
      return { trees, stats };
    },
  };
}

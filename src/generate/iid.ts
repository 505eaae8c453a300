/**
 * `iid` (GRPO baseline): one sampler request per prompt with n = G and the full response length;
 * all prompts of the batch in one sample() call. The tree is a star: root + G leaves.
 *
 * Partial rollouts. With `stopAfterTrees` the call passes the sampler `stopAfterGroups` (group = tree
 * index): once that many trees have all their leaves finished, the other leaves end `abort` with the
 * tokens they decoded. A later call given such a tree (`GenerateInput.tree`) sends one request per
 * aborted leaf (prompt + the leaf's tokens, n = 1, the rest of the response budget) and appends the
 * continuation to the SAME leaf (appendToNode records the newer weight version per token), so the
 * tree's shape is an uninterrupted run's. Without `stopAfterTrees` a fresh call is unchanged.
 */
import {
  addNode,
  appendToNode,
  createTree,
  isComplete,
  leaves,
  prefixTokens,
  responseTokens,
  ROOT_ID,
  type FinishReason,
  type RolloutTree,
} from '../core/tree.js';
import type { SampleCompletion, SampleOptions, SampleRequest } from '../engine/types.js';
import { addUsage, emptyStats, type GenerateContext, type GenerateInput, type Generator } from './types.js';

export interface IidOptions {
  kind: 'iid';
  /** G: samples per prompt. */
  groupSize: number;
}

/** What a request grows: G fresh leaves under the root of tree `tree`, or its aborted leaf `leafId`. */
interface Target {
  tree: number;
  leafId?: string;
}

export function iidGenerator(options: IidOptions): Generator {
  return {
    kind: 'iid',
    groupSize: options.groupSize,
    async grow(inputs: GenerateInput[], ctx: GenerateContext) {
      const started = Date.now();
      const stats = emptyStats();
      const trees: RolloutTree[] = inputs.map(
        (input, i) =>
          input.tree ?? createTree(`${ctx.treeIdPrefix}${i}`, input.item.id, input.promptTokens, { generator: 'iid' }),
      );
      const leavesBefore = trees.map((t) => (isComplete(t) ? leaves(t).length : 0));
      const requests: SampleRequest[] = [];
      const targets: Target[] = [];
      trees.forEach((tree, i) => {
        for (const { request, leafId } of treeRequests(tree, inputs[i].groupSize ?? options.groupSize, ctx)) {
          requests.push(request);
          targets.push({ tree: i, leafId });
        }
      });
      const sampleOptions = stopRule(trees, targets, ctx);
      if (requests.length && sampleOptions) {
        const results = await ctx.sampler.sample(requests, sampleOptions);
        stats.samplerCalls++;
        results.forEach((result, j) => {
          addUsage(stats, result.usage);
          const { tree, leafId } = targets[j];
          for (const c of result.completions) {
            const segment = {
              tokens: c.tokens,
              logprobs: c.logprobs,
              entropies: c.entropies,
              finishReason: finishOf(c),
              weightVersion: result.weightVersion,
            };
            if (leafId === undefined) addNode(trees[tree], ROOT_ID, segment);
            else appendToNode(trees[tree], leafId, segment);
          }
        });
      }
      stats.trajectories = trees.reduce((s, t, i) => s + (isComplete(t) ? leaves(t).length - leavesBefore[i] : 0), 0);
      stats.wallMs = Date.now() - started;
      return { trees, stats };
    },
  };
}

/**
 * The requests a tree needs, in order: G samples from the prompt when nothing was grown yet, else one
 * per aborted leaf. A leaf that already used the whole response budget just finishes with `length`.
 * A complete tree with fewer than G leaves (per-prompt allocation's later round) gets the missing
 * ones from the prompt.
 */
function treeRequests(
  tree: RolloutTree,
  G: number,
  ctx: GenerateContext,
): Array<{ request: SampleRequest; leafId?: string }> {
  const request = (tokens: number[], n: number, maxTokens: number): SampleRequest => ({
    tokens,
    n,
    maxTokens,
    temperature: ctx.temperature,
    topP: ctx.topP,
    topK: ctx.topK,
    stopTokens: ctx.stopTokens,
    seed: ctx.rng.nextU32(),
    affinityKey: tree.id,
  });
  if (!tree.nodes[ROOT_ID].children.length)
    return [{ request: request(tree.nodes[ROOT_ID].tokens, G, ctx.maxResponseTokens) }];
  const out: Array<{ request: SampleRequest; leafId?: string }> = [];
  if (isComplete(tree)) {
    const missing = G - leaves(tree).length;
    return missing > 0 ? [{ request: request(tree.nodes[ROOT_ID].tokens, missing, ctx.maxResponseTokens) }] : [];
  }
  for (const leaf of leaves(tree)) {
    if (leaf.finishReason !== 'abort') continue;
    const used = responseTokens(tree, leaf.id).length;
    if (used >= ctx.maxResponseTokens) leaf.finishReason = 'length';
    else out.push({ request: request(prefixTokens(tree, leaf.id), 1, ctx.maxResponseTokens - used), leafId: leaf.id });
  }
  return out;
}

/**
 * The sampler options of the call; with `stopAfterTrees`, trees already complete without a request
 * count towards it. Undefined when that count is already reached (nothing is sampled).
 */
function stopRule(trees: RolloutTree[], targets: Target[], ctx: GenerateContext): SampleOptions | undefined {
  if (ctx.stopAfterTrees === undefined) return { signal: ctx.signal };
  const sampled = new Set(targets.map((t) => t.tree));
  const done = trees.filter((t, i) => !sampled.has(i) && isComplete(t)).length;
  const count = ctx.stopAfterTrees - done;
  if (count <= 0) return undefined;
  return { signal: ctx.signal, stopAfterGroups: { groupOf: targets.map((t) => t.tree), count } };
}

function finishOf(c: SampleCompletion): FinishReason {
  return c.finishReason === 'stop' ? 'stop' : c.finishReason === 'abort' ? 'abort' : 'length';
}

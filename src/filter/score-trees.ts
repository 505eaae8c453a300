/**
 * The Filter stage over trees: score every unscored leaf of each complete tree with the run's reward
 * (async, batched, per-call timeout; see reward.ts). A leaf whose reward failed (the verifier threw or
 * timed out: `info.error`, at the top level or in one part of a composite reward) is marked
 * `finishReason: 'error'` with the reason, so the learner drops its tree instead of training on a
 * made-up reward. Incomplete trees (partial rollouts) are left for a later step. A group reward
 * (`prepareGroup`, e.g. majority vote) first sees all finished leaves of each tree.
 */
import { isComplete, leaves, responseTokens, treeHint, type RolloutTree, type TreeNode } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import { scoreBatch } from './reward.js';
import type { RewardFunction, ScoreInput } from './types.js';

export interface ScoreTreesOptions {
  decode: (tokens: number[]) => string;
  concurrency: number;
  timeoutMs: number;
  failureReward: number;
}

/** Scores complete trees in place; returns the number of leaves scored and of reward failures. */
export async function scoreTrees(
  trees: RolloutTree[],
  items: Map<string, TaskItem>,
  reward: RewardFunction,
  options: ScoreTreesOptions,
): Promise<{ scored: number; failed: number }> {
  const inputOf = (tree: RolloutTree, leaf: TreeNode): ScoreInput => {
    const tokens = responseTokens(tree, leaf.id);
    // a response hint (hint rescue) was the start of this response: the verifier sees all of it
    const hint = treeHint(tree);
    const prefix = hint?.kind === 'response' ? hint.text : '';
    const text = prefix + options.decode(tokens);
    const e = leaf.episode;
    if (!e) return { item: items.get(tree.itemId)!, response: text, responseTokens: tokens.length };
    // an agent episode: the verifier reads the final answer; the transcript and the environment's reward ride along
    return {
      item: items.get(tree.itemId)!,
      response: e.finalAnswer,
      responseTokens: tokens.length,
      episode: {
        transcript: text,
        envReward: e.envReward,
        turns: e.turns,
        toolCalls: e.toolCalls,
        toolErrors: e.toolErrors,
        ...(e.messages ? { messages: e.messages } : {}),
        ...(e.calls ? { calls: e.calls } : {}),
        ...(e.info ? { info: e.info } : {}),
        ...(e.episodeId ? { episodeId: e.episodeId } : {}),
      },
    };
  };
  const jobs: Array<{ tree: RolloutTree; leaf: TreeNode; input: ScoreInput }> = [];
  let groupFailures = 0;
  for (const tree of trees.filter((t) => isComplete(t))) {
    const group = leaves(tree).filter((l) => l.finishReason !== 'error');
    if (!group.some((l) => l.reward === undefined)) continue;
    // group rewards (majority vote) see every finished leaf of the tree, scored earlier or not
    let groupInputs = group.map((leaf) => inputOf(tree, leaf));
    try {
      if (reward.prepareGroup) groupInputs = await reward.prepareGroup(groupInputs);
    } catch (error) {
      // errors are data: the group's unscored leaves fail, the tree is not trained on
      for (const leaf of group.filter((l) => l.reward === undefined))
        Object.assign(leaf, {
          finishReason: 'error',
          error: `reward: group labelling failed: ${(error as Error)?.message ?? error}`,
        });
      groupFailures += group.filter((l) => l.finishReason === 'error').length;
      continue;
    }
    group.forEach((leaf, i) => leaf.reward === undefined && jobs.push({ tree, leaf, input: groupInputs[i] }));
  }
  const inputs = jobs.map((j) => j.input);
  const results = await scoreBatch(reward, inputs, {
    concurrency: options.concurrency,
    timeoutMs: options.timeoutMs,
    failureReward: options.failureReward,
  });
  let failed = groupFailures;
  jobs.forEach(({ leaf }, i) => {
    const r = results[i];
    leaf.reward = r.reward;
    leaf.rewardInfo = { components: r.components, info: r.info };
    const error = rewardError(r.info);
    if (error !== undefined) {
      leaf.finishReason = 'error';
      leaf.error = `reward: ${error}`;
      failed++;
    }
  });
  return { scored: jobs.length + groupFailures, failed };
}

/** The failure message of a reward result, if the reward (or one part of it) failed. */
export function rewardError(info: Record<string, unknown>): string | undefined {
  if (typeof info.error === 'string') return info.error;
  for (const v of Object.values(info)) {
    if (v && typeof v === 'object' && typeof (v as { error?: unknown }).error === 'string')
      return (v as { error: string }).error;
  }
  return undefined;
}

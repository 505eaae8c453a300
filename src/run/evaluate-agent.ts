/**
 * Held-out evaluation of an agent run: the same figures as `evaluate` (greedy success, pass@k, mean
 * sampled success) but every sample is a whole multi-turn episode run by the agent generator with
 * i.i.d. branching (one episode at temperature 0, k at temperature 1), scored by the task's verifier
 * on the final answer: episodes in a tool environment Arbor drives, or of the user's own agent through
 * the gateway. Also reports the greedy episodes' tool use. With `progress`, each batch of episodes is
 * announced and its elapsed time and model calls reported every second (a line every 10 s off a terminal):
 * episodes end at different turns, so there is no count toward a total to give an ETA from.
 */
import { formatSeconds, type ProgressUpdate } from '../core/progress-count.js';
import type { Rng } from '../core/rng.js';
import { leaves, responseTokens, type RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import type { Sampler } from '../engine/types.js';
import { isCorrect } from '../filter/constants.js';
import { scoreTrees } from '../filter/score-trees.js';
import type { RewardFunction } from '../filter/types.js';
import { agentGenerator, type AgentOptions } from '../generate/agent.js';
import type { AgentDriver, AgentRuntime } from '../generate/types.js';
import type { EvalResult } from './evaluate.js';

export interface AgentEvalContext {
  sampler: Sampler;
  /** A tool environment Arbor drives (one of agent or gateway). */
  agent?: AgentRuntime;
  /** The user's own agent through the gateway (env.kind agent). */
  gateway?: AgentDriver;
  options: AgentOptions;
  decode: (tokens: number[]) => string;
  stopTokens: number[];
  maxResponseTokens: number;
  reward: RewardFunction;
  rng: Rng;
  /** Status lines while the episodes run (see the module comment). */
  progress?: ProgressUpdate;
}

/** Agent figures beside the accuracy: tool use of the greedy episodes. */
export interface AgentEvalExtras {
  toolCallRate: number;
  toolSuccessRate: number;
  turnsPerEpisode: number;
}

export async function evaluateAgent(
  items: TaskItem[],
  k: number,
  ctx: AgentEvalContext,
): Promise<EvalResult & { agent: AgentEvalExtras }> {
  const greedyTrees = await episodes(items, 1, 0, 'eval/greedy', ctx);
  const greedy = greedyTrees.map((t) => isCorrect(leaves(t)[0]?.reward ?? 0));
  let passAtK: number | null = null;
  let sampleAccuracy: number | null = null;
  if (k > 0) {
    const sampled = await episodes(items, k, 1, 'eval/sampled', ctx);
    const correct = sampled.map((t) => leaves(t).map((l) => isCorrect(l.reward ?? 0)));
    passAtK = correct.filter((c) => c.some(Boolean)).length / items.length;
    sampleAccuracy = correct.flat().filter(Boolean).length / Math.max(1, correct.flat().length);
  }
  const eps = greedyTrees.flatMap((t) =>
    leaves(t)
      .map((l) => l.episode)
      .filter((e) => e !== undefined),
  );
  const calls = eps.reduce((a, e) => a + e.toolCalls, 0);
  const errors = eps.reduce((a, e) => a + e.toolErrors, 0);
  const agent: AgentEvalExtras = {
    toolCallRate: eps.filter((e) => e.toolCalls > 0).length / Math.max(1, eps.length),
    toolSuccessRate: calls ? (calls - errors) / calls : 0,
    turnsPerEpisode: eps.reduce((a, e) => a + e.turns, 0) / Math.max(1, eps.length),
  };
  return {
    greedyAccuracy: greedy.filter(Boolean).length / Math.max(1, items.length),
    passAtK,
    sampleAccuracy,
    k,
    count: items.length,
    samples: greedyTrees.slice(0, 5).map((t, i) => {
      const leaf = leaves(t)[0];
      return {
        prompt: items[i].prompt,
        response: leaf ? ctx.decode(responseTokens(t, leaf.id)) : '',
        reward: leaf?.reward ?? 0,
      };
    }),
    agent,
    extra: {
      eval_tool_call_rate: agent.toolCallRate,
      eval_tool_success_rate: agent.toolSuccessRate,
      eval_turns_per_episode: agent.turnsPerEpisode,
    },
  };
}

/** `n` i.i.d. episodes per item at `temperature`, scored (all items in one grow call). */
async function episodes(
  items: TaskItem[],
  n: number,
  temperature: number,
  label: string,
  ctx: AgentEvalContext,
): Promise<RolloutTree[]> {
  const generator = agentGenerator({ ...ctx.options, groupSize: n, branching: 'iid' });
  const what = `${items.length * n} ${label.replace('eval/', '')} episodes`;
  const watched = ctx.progress && watchEpisodes(ctx.sampler, ctx.progress, what);
  const { trees } = await generator
    .grow(
      items.map((item) => ({ item, promptTokens: [] })),
      {
        sampler: watched?.sampler ?? ctx.sampler,
        rng: ctx.rng.fork(label),
        step: 0,
        stopTokens: ctx.stopTokens,
        maxResponseTokens: ctx.maxResponseTokens,
        temperature,
        topP: 1,
        topK: 0,
        treeIdPrefix: `${label}/`,
        agent: ctx.agent,
        gateway: ctx.gateway,
      },
    )
    .finally(() => watched?.stop());
  await scoreTrees(trees, new Map(items.map((i) => [i.id, i])), ctx.reward, {
    decode: ctx.decode,
    concurrency: 8,
    timeoutMs: 10_000,
    failureReward: 0,
  });
  return trees;
}

/**
 * The sampler, counting the model calls it answers, and a status line "evaluating: <what>, <n> model
 * calls, <elapsed>" every second (a milestone at the start and every 10 s) until `stop`.
 */
function watchEpisodes(
  sampler: Sampler,
  progress: ProgressUpdate,
  what: string,
): { sampler: Sampler; stop: () => void } {
  const started = Date.now();
  let calls = 0;
  let seconds = 0;
  // the user's own agent (the gateway) calls its own sampler: no count then
  const report = (milestone: boolean) => {
    const callsText = calls ? `${calls} model calls, ` : '';
    progress(`evaluating: ${what}, ${callsText}${formatSeconds((Date.now() - started) / 1000)}`, milestone);
  };
  report(true);
  const timer = setInterval(() => report(++seconds % 10 === 0), 1000);
  timer.unref();
  const counted: Sampler = {
    specificationVersion: sampler.specificationVersion,
    capabilities: sampler.capabilities,
    sample: async (requests, options) => {
      const results = await sampler.sample(requests, options);
      calls += requests.length;
      return results;
    },
    release: (handles) => sampler.release(handles),
    weightVersion: () => sampler.weightVersion(),
  };
  return { sampler: counted, stop: () => clearInterval(timer) };
}

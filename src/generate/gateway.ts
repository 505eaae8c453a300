/**
 * The `agent` generator when the environment is the user's own agent (`env.kind: agent`): for each
 * prompt, G independent episodes of the agent run through the gateway (`ctx.gateway`), each under the
 * run's sampling policy and a seed drawn here in a fixed order (so a run does not depend on how the
 * episodes interleave), then the G episodes' recorded calls become one tree (generate/episode-tree.ts):
 * the shared prompt is its root, each episode a private subtree of token-exact nodes. Not supported:
 * continuing a tree (partial rollouts, per-prompt allocation's later rounds) and branching inside an
 * episode (the agent, not Arbor, drives its turns).
 */
import { ConfigError } from '../core/errors.js';
import type { EpisodeRecord } from '../core/episode.js';
import { leaves, type RolloutTree } from '../core/tree.js';
import type { AgentOptions, AgentTreeStats } from './agent.js';
import { assembleEpisodeTree, type GatewayTreeStats as AssembledStats } from './episode-tree.js';
import { emptyStats, type GenerateContext, type GenerateInput, type GenerateStats } from './types.js';

/** Per-tree counters of a gateway tree (`tree.meta.gateway`): the assembly's, and unparsed tool calls. */
export interface GatewayTreeStats extends AssembledStats {
  /** Choices whose tool-call markup did not parse (returned to the agent as content). */
  toolParseFailures: number;
}

export async function growThroughGateway(
  inputs: GenerateInput[],
  ctx: GenerateContext,
  options: AgentOptions,
): Promise<{ trees: RolloutTree[]; stats: GenerateStats }> {
  const driver = ctx.gateway;
  if (!driver) throw new ConfigError('env.kind "agent": the run opened no gateway', 'env');
  const started = Date.now();
  // every seed is drawn before any episode runs: the same seeds whatever order the episodes finish in
  const jobs = inputs.map((input, i) => {
    if (input.tree)
      throw new ConfigError(
        'env.kind "agent" grows each tree once (G episodes): use a control strategy that does not continue trees',
        'control.kind',
      );
    const treeId = `${ctx.treeIdPrefix}${i}`;
    const size = input.groupSize ?? options.groupSize;
    const episodes = Array.from({ length: size }, (_, k) => ({
      episodeId: `${treeId}/e${k}`,
      seed: ctx.rng.nextU32(),
    }));
    return { input, treeId, episodes };
  });
  const policy = {
    temperature: ctx.temperature,
    topP: ctx.topP,
    topK: ctx.topK,
    maxTokens: ctx.maxResponseTokens,
    signal: ctx.signal,
  };
  const records = await Promise.all(
    jobs.map((job) => Promise.all(job.episodes.map((e) => driver.runEpisode(job.input.item, { ...e, ...policy })))),
  );
  const stats = emptyStats();
  const trees = jobs.map((job, i) => {
    const { tree } = assembleEpisodeTree(job.treeId, job.input.item.id, records[i], { branching: 'iid' });
    addRecordStats(stats, records[i]);
    const gateway = { ...(tree.meta?.gateway as object), toolParseFailures: parseFailures(records[i]) };
    tree.meta = { ...tree.meta, agent: agentStats(records[i]), gateway };
    stats.trajectories += leaves(tree).length;
    return tree;
  });
  stats.wallMs = Date.now() - started;
  return { trees, stats };
}

/** The engine accounting of a group's calls. */
function addRecordStats(stats: GenerateStats, records: EpisodeRecord[]): void {
  for (const call of records.flatMap((r) => r.calls)) {
    stats.tokensDecoded += call.usage.tokensDecoded;
    stats.prefixTokensReused += call.usage.prefixTokensReused;
    stats.promptTokensComputed += call.usage.promptTokensComputed;
    stats.samplerCalls++;
  }
}

/** The agent generator's per-tree counters (turns = calls; tool errors = unparsed tool-call markup). */
function agentStats(records: EpisodeRecord[]): AgentTreeStats {
  const choices = records.flatMap((r) => r.calls.flatMap((c) => c.choices));
  return {
    episodes: records.length,
    turns: records.reduce((a, r) => a + r.calls.length, 0),
    toolCalls: choices.reduce((a, c) => a + c.toolCalls.length, 0),
    toolErrors: choices.filter((c) => c.toolParseFailed).length,
    toolTimeouts: 0,
    forks: 0,
  };
}

/** Choices of a group whose tool-call markup did not parse. */
function parseFailures(records: EpisodeRecord[]): number {
  return records.flatMap((r) => r.calls.flatMap((c) => c.choices)).filter((c) => c.toolParseFailed).length;
}

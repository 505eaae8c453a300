/**
 * The rollout side of a step (producers in the architecture diagram): Select → Control → Generate →
 * Filter. `produce(request)` runs the configured control strategy, which selects prompts, grows or
 * continues trees through the sampler and scores the complete ones, and returns the learner's batch
 * plus what is carried to the next step. All state it needs (data order, carried trees, the weight
 * version) comes in the request and goes out in the result, so the same code runs in-process (sync
 * mode, remote engines) or in a worker thread (async mode on the embedded engine), and a producer
 * result is an exact function of its request: that is what makes async runs resumable bit for bit.
 */
import { Rng } from '../core/rng.js';
import { createTree, hasError, leaves, ROOT_ID, type RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import {
  controlFromConfig,
  isInformative,
  PromptStats,
  type CarriedTree,
  type ControlIO,
  type ControlState,
  type ControlStrategy,
  type GrowEntry,
  type PromptHint,
} from '../control/index.js';
import { controlHooks, type ControlHook, type ControlStep } from '../control/hooks.js';
import { selectHook } from '../replay/select-hook.js';
import type { Sampler, TextTokenizer } from '../engine/types.js';
import { loadReward } from '../filter/registry.js';
import { scoreTrees } from '../filter/score-trees.js';
import type { RewardFunction } from '../filter/types.js';
import { generatorFromConfig, type GenerateStats, type Generator } from '../generate/index.js';
import type { GatewayTreeStats } from '../generate/gateway.js';
import { growSafely } from '../generate/safe.js';
import { emptyStats } from '../generate/types.js';
import { siblingStats } from '../generate/siblings.js';
import { DataOrder, type DataOrderState } from '../replay/data-order.js';
import { taskFromConfig } from '../tasks/index.js';
import type { ArborConfig } from './config.js';
import { fitPrompts, promptEncoder, stopTokens } from './prompts.js';
import type { AgentRuntime, QualityHook } from '../generate/types.js';
import { agentRuntimeFor } from './agent-runtime.js';
import { openGatewayAgent, type GatewayAgent } from './gateway-runtime.js';
import { requestEntropy, shapingNeeds } from '../optimize/advantages/shaping.js';
import { componentPools } from '../replay/ucb.js';
import { mixLabels } from '../tasks/mix.js';

export interface ProduceRequest {
  /** The learner step this batch is for. */
  step: number;
  /** Weight version the sampler must hold (checked; undefined for remote samplers, which serve what they hold). */
  version?: number;
  /** Trees the store carried over (partial and ready), oldest first. */
  carried: CarriedTree[];
  /** Select-stage position before this batch. */
  data: DataOrderState;
  /** What control strategies learned so far (prompt statistics, skip probabilities). */
  control?: ControlState;
}

export interface ProduceResult {
  step: number;
  batch: Array<{ tree: RolloutTree; item: TaskItem }>;
  /** Every tree grown or continued (for metrics and logged trees). */
  drawn: RolloutTree[];
  carry: CarriedTree[];
  data: DataOrderState;
  control: ControlState;
  stats: GenerateStats;
  /** Control counters plus trees_error and reward_failures. */
  info: Record<string, number>;
  /** Milliseconds in the Generate and Filter stages and in all of produce(). */
  timings: { generate: number; score: number; produce: number };
  /** Weight version that generated this batch's new tokens. */
  weightVersion: number;
}

export class Producer {
  private constructor(
    private readonly config: ArborConfig,
    private readonly sampler: Sampler,
    private readonly tokenizer: TextTokenizer,
    private readonly pool: TaskItem[],
    private readonly reward: RewardFunction,
    private readonly generator: Generator,
    private readonly control: ControlStrategy,
    /** The Control methods' hooks (control/hooks.ts, replay/select-hook.ts), in the order they run. */
    private readonly hooks: ControlHook[],
    /** generate.kind agent: environments, tool format and token I/O. */
    private readonly agent?: AgentRuntime,
    /** env.kind agent: the user's own agent through the gateway. */
    private readonly gateway?: GatewayAgent,
  ) {}

  static async create(config: ArborConfig, sampler: Sampler, tokenizer: TextTokenizer): Promise<Producer> {
    // the entropy shaping term reads the per-token entropies the sampler records on the trees
    if (shapingNeeds(config.optimize.advantage.shaping).entropy) sampler = requestEntropy(sampler);
    const task = await taskFromConfig(config.task);
    const reward = await loadReward(config.reward, {
      taskReward: task.reward,
      taskExtract: task.extractAnswer?.bind(task),
      taskStepJudge: task.firstWrongStep?.bind(task),
      safety: { timeoutMs: config.reward.timeoutMs, failureReward: config.reward.failureReward },
    });
    const contextLength = config.engine.kind === 'embedded' ? config.model.contextLength : undefined;
    const agent = await agentRuntimeFor(config, tokenizer);
    let gateway: GatewayAgent | undefined;
    // the environment's server processes (and the gateway's port) are closed on every error path below
    try {
      gateway = await openGatewayAgent(config, sampler, tokenizer);
      const encodeForFit = agent
        ? (item: TaskItem) => agent.encodePrompt(item, '')
        : promptEncoder(tokenizer, config.engine.chatTemplate, config.engine.chatTemplateKwargs);
      const { items: pool, skipped } = fitPrompts(
        task.makeItems('train', config.run.trainItems, config.run.seed),
        encodeForFit,
        contextLength,
        config.task.overlong,
        'training',
      );
      if (skipped)
        console.error(`task.overlong skip: ${skipped} training prompts leave no room for a response and are left out`);
      const generator = generatorFromConfig(config.generate);
      const c = config.control;
      const control = controlFromConfig(c, { allocate: c.allocate, hint: c.hint, groupSize: generator.groupSize });
      const hooks = [
        ...controlHooks(c, {
          valueAllocation:
            (config.generate.kind === 'treepo' && config.generate.allocation === 'value') ||
            (config.generate.kind === 'agent' && config.generate.branching === 'trace'),
          treepo: config.generate.kind === 'treepo',
          maxResponseTokens: config.sampling.maxResponseTokens,
          contextLength: contextLength ?? Infinity,
          // read when a step begins (the sampler's capabilities, not at construction)
          get samplerHiddenSize() {
            return sampler.capabilities.hiddenSize ?? 0;
          },
          get samplerEntropy() {
            return sampler.capabilities.entropy;
          },
          decode: (tokens) => tokenizer.decode(tokens),
        }),
        selectHook(c.select, {
          seed: config.run.seed,
          components:
            c.select.kind === 'ucb' && config.task.mix ? componentPools(pool, mixLabels(config.task.mix)) : undefined,
          skipping: c.skip.kind !== 'none',
        }),
      ].filter((h): h is ControlHook => h !== undefined);
      return new Producer(config, sampler, tokenizer, pool, reward, generator, control, hooks, agent, gateway);
    } catch (error) {
      await agent?.factory.close();
      await gateway?.close();
      throw error;
    }
  }

  /**
   * An empty tree for `item` grown with a hint: a response hint ends the root's context (and is
   * scored as part of the response), a context hint comes before the prompt and `meta.trainPrompt`
   * keeps the hint-free prompt the learner trains on (core/tree.ts TreeHint).
   */
  private hintedTree(
    item: TaskItem,
    hint: PromptHint,
    id: string,
    encodePrompt: (item: TaskItem) => number[],
  ): RolloutTree {
    const plain = encodePrompt(item);
    if (hint.kind === 'response') {
      const extra = this.tokenizer.encode(hint.text);
      return createTree(id, item.id, [...plain, ...extra], {
        generator: this.generator.kind,
        hint: { kind: 'response', text: hint.text, tokens: extra.length },
      });
    }
    const context = encodePrompt({ ...item, prompt: hint.text + item.prompt });
    return createTree(id, item.id, context, {
      generator: this.generator.kind,
      hint: { kind: 'context', text: hint.text, tokens: context.length - plain.length },
      trainPrompt: plain,
    });
  }

  /** Release what the producer opened (an agent run's environment: MCP server processes, sessions). */
  async close(): Promise<void> {
    await this.agent?.factory.close();
    await this.gateway?.close();
  }

  get generatorKind(): string {
    return this.generator.kind;
  }

  get groupSize(): number {
    return this.generator.groupSize;
  }

  async produce(request: ProduceRequest): Promise<ProduceResult> {
    const started = Date.now();
    const version = this.sampler.weightVersion();
    if (request.version !== undefined && version !== request.version)
      throw new Error(
        `producer: sampler holds weight version ${version}, step ${request.step} needs ${request.version}`,
      );
    const { config } = this;
    const data = new DataOrder(this.pool.length, config.run.seed, { ...request.data });
    const rng = new Rng(config.run.seed).fork(`step/${request.step}`);
    const encodePrompt = promptEncoder(this.tokenizer, config.engine.chatTemplate);
    const state: ControlState = structuredClone(request.control ?? {});
    const info: Record<string, number> = { trees_error: 0, reward_failures: 0, prompts_skipped: 0 };
    const stats = new PromptStats(config.control.promptStats, state.prompts);
    const step: ControlStep = { step: request.step, rng, state, info, stats };
    // Control's hooks for this step, in order: each may wrap prompt selection and encoding, watch generation, learn after
    const hooks = this.hooks.map((h) => h.begin(step));
    const take = (count: number) => data.take(count).map((i) => this.pool[i]);
    const select = hooks.reduce((next, h) => h.selectPrompts?.(next) ?? next, take);
    const freshPrompt = hooks.reduce((next, h) => h.encodePrompt?.(next) ?? next, encodePrompt);
    const run = this.stepRun(request.step, rng, freshPrompt, hooks.find((h) => h.generate)?.generate, info);
    const out = await this.control.collect(config.run.promptsPerStep, request.carried, {
      select,
      grow: run.grow,
      hinted: (item, hint, index) => this.hintedTree(item, hint, `s${request.step}h${index}`, encodePrompt),
      stats,
      step: request.step,
      groupSize: this.generator.groupSize,
    });
    const drawn = [...new Set(out.drawn)];
    for (const h of hooks) h.scored?.(drawn, out.batch);
    Object.assign(info, batchInfo(out.batch, drawn));
    run.timings.produce = Date.now() - started;
    return {
      step: request.step,
      batch: out.batch,
      drawn: out.drawn,
      carry: out.carry,
      data: data.state,
      control: state,
      stats: run.stats,
      info: { ...info, ...out.info },
      timings: run.timings,
      weightVersion: version,
    };
  }

  /** The step's Generate + Filter: `grow` grows (or continues) trees and scores the complete ones, timing both. */
  private stepRun(
    step: number,
    rng: Rng,
    freshPrompt: (item: TaskItem) => number[],
    quality: QualityHook | undefined,
    info: Record<string, number>,
  ): { grow: ControlIO['grow']; stats: GenerateStats; timings: ProduceResult['timings'] } {
    const { config } = this;
    const stats = emptyStats();
    const timings = { generate: 0, score: 0, produce: 0 };
    const grow = async (
      entries: GrowEntry[],
      round: number,
      options: { stopAfterTrees?: number } = {},
    ): Promise<RolloutTree[]> => {
      let t = Date.now();
      // a response hint's tokens count against the response budget
      const hintTokens = Math.max(
        0,
        ...entries
          .map((e) => e.tree?.meta?.hint as { kind?: string; tokens?: number } | undefined)
          .map((h) => (h?.kind === 'response' ? (h.tokens ?? 0) : 0)),
      );
      const grown = await growSafely(
        this.generator,
        entries.map((e) => ({
          item: e.item,
          promptTokens: e.tree ? e.tree.nodes[ROOT_ID].tokens : freshPrompt(e.item),
          tree: e.tree,
          groupSize: e.groupSize,
        })),
        {
          sampler: this.sampler,
          rng: rng.fork(`generate/${round}`),
          step,
          stopTokens: stopTokens(this.tokenizer),
          maxResponseTokens: Math.max(1, config.sampling.maxResponseTokens - hintTokens),
          temperature: config.sampling.temperature,
          topP: config.sampling.topP,
          topK: config.sampling.topK,
          treeIdPrefix: `s${step}r${round}p`,
          stopAfterTrees: options.stopAfterTrees,
          quality,
          agent: this.agent,
          gateway: this.gateway,
        },
      );
      timings.generate += Date.now() - t;
      for (const k of Object.keys(stats) as Array<keyof GenerateStats>) stats[k] += grown.stats[k];
      // every error tree: those growSafely made of a failed call and those the generator returned (a cut episode)
      info.trees_error += grown.trees.filter((t) => hasError(t)).length;
      t = Date.now();
      const items = new Map(entries.map((e) => [e.item.id, e.item]));
      const scored = await scoreTrees(grown.trees, items, this.reward, {
        decode: (tokens) => this.tokenizer.decode(tokens),
        concurrency: config.reward.concurrency,
        timeoutMs: config.reward.timeoutMs,
        failureReward: config.reward.failureReward,
      });
      info.reward_failures += scored.failed;
      timings.score += Date.now() - t;
      return grown.trees;
    };
    return { grow, stats, timings };
  }
}

/** Per-step counters of the batch and of every tree grown: informative groups, rollouts, siblings, LATR forks, pruning. */
function batchInfo(batch: Array<{ tree: RolloutTree }>, drawn: RolloutTree[]): Record<string, number> {
  const size = (t: RolloutTree) => leaves(t).length;
  const informative = batch.filter((b) => isInformative(b.tree));
  const rollouts = batch.reduce((a, b) => a + size(b.tree), 0);
  const siblings = siblingStats(drawn);
  const info: Record<string, number> = {
    informative_groups: batch.length ? informative.length / batch.length : 0,
    informative_rollouts: informative.reduce((a, b) => a + size(b.tree), 0) / Math.max(1, rollouts),
    rollouts,
    sibling_pairs: siblings.pairs,
    identical_sibling_rate: siblings.pairs ? siblings.identical / siblings.pairs : 0,
  };
  const sum = (key: string, field: string) =>
    drawn.reduce((a, t) => a + ((t.meta?.[key] as Record<string, number> | undefined)?.[field] ?? 0), 0);
  if (drawn.some((t) => t.meta?.latr))
    Object.assign(info, { latr_forks: sum('latr', 'forks'), latr_pruned: sum('latr', 'pruned') });
  if (drawn.some((t) => t.meta?.pruned))
    Object.assign(info, { pruned_paths: sum('pruned', 'paths'), pruned_tokens: sum('pruned', 'tokens') });
  if (drawn.some((t) => t.meta?.agent)) Object.assign(info, agentInfo(drawn));
  return info;
}

/** Agent runs: turns per episode, tool calls and errors, tool-call success rate, how episodes ended. */
function agentInfo(drawn: RolloutTree[]): Record<string, number> {
  const episodes = drawn.flatMap((t) =>
    leaves(t)
      .map((l) => l.episode)
      .filter((e) => e !== undefined),
  );
  const calls = episodes.reduce((a, e) => a + e.toolCalls, 0);
  const errors = episodes.reduce((a, e) => a + e.toolErrors, 0);
  const n = Math.max(1, episodes.length);
  const info: Record<string, number> = {
    agent_episodes: episodes.length,
    agent_turns_per_episode: episodes.reduce((a, e) => a + e.turns, 0) / n,
    agent_tool_calls: calls,
    agent_tool_errors: errors,
    agent_tool_success_rate: calls ? (calls - errors) / calls : 0,
    agent_tool_call_rate: episodes.filter((e) => e.toolCalls > 0).length / n,
    agent_forks: drawn.reduce((a, t) => a + ((t.meta?.agent as { forks?: number } | undefined)?.forks ?? 0), 0),
  };
  for (const end of ['answer', 'env_done', 'max_turns', 'max_tokens', 'timeout'] as const)
    info[`agent_end_${end}`] = episodes.filter((e) => e.end === end).length / n;
  if (drawn.some((t) => t.meta?.gateway)) Object.assign(info, gatewayInfo(drawn));
  return info;
}

/** Gateway runs (env.kind agent): episodes, calls, forks, unparsed tool calls and failed episodes of the step. */
function gatewayInfo(drawn: RolloutTree[]): Record<string, number> {
  const sum = (field: keyof GatewayTreeStats) =>
    drawn.reduce((a, t) => a + ((t.meta?.gateway as Partial<GatewayTreeStats> | undefined)?.[field] ?? 0), 0);
  const episodes = sum('episodes');
  return {
    // a forked episode has several leaves: count episodes, not leaves
    agent_episodes: episodes,
    gateway_calls: sum('calls'),
    gateway_calls_per_episode: sum('calls') / Math.max(1, episodes),
    episode_forks: sum('forks'),
    tool_parse_failures: sum('toolParseFailures'),
    agent_errors: sum('errors'),
    gateway_aborted_choices: sum('aborted'),
  };
}

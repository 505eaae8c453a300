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
import { ConfigError } from '../core/errors.js';
import { createTree, hasError, isComplete, leaves, responseTokens, ROOT_ID, type RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import {
  adaptSkip,
  controlFromConfig,
  isInformative,
  PromptStats,
  selectSkipping,
  type CarriedTree,
  type ControlState,
  type ControlStrategy,
  type GrowEntry,
  type PromptHint,
} from '../control/index.js';
import { correctness } from '../filter/constants.js';
import { encodeContrastive, exemplarDB, type ExemplarState } from '../control/contrastive.js';
import { QualityStep } from '../control/quality-step.js';
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
import { selectByDifficulty } from '../replay/select.js';
import type { AgentRuntime } from '../generate/types.js';
import { agentRuntimeFor } from './agent-runtime.js';
import { openGatewayAgent, type GatewayAgent } from './gateway-runtime.js';
import { requestEntropy, shapingNeeds } from '../optimize/advantages/shaping.js';
import { componentPools, UcbCurriculum, type UcbState } from '../replay/ucb.js';
import { componentOfId, mixLabels } from '../tasks/mix.js';

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
    /** select.kind ucb: the train pool split by task.mix component. */
    private readonly components?: Map<string, TaskItem[]>,
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
      if (config.select.kind !== 'sequential' && config.skip.kind !== 'none')
        throw new ConfigError(
          `select.kind "${config.select.kind}" and skip.kind "${config.skip.kind}" both choose the step's prompts: use one of them`,
          'select.kind',
        );
      if (config.prune.kind !== 'none' && config.generate.kind !== 'treepo')
        throw new ConfigError(
          `prune.kind "${config.prune.kind}" prunes TreePO paths: it needs generate.kind "treepo" (got "${config.generate.kind}")`,
          'prune.kind',
        );
      const generator = generatorFromConfig(config.generate);
      exemplarDB(config.contrastive); // checks best + worst ≤ capacity before the run starts
      const control = controlFromConfig(config.control, {
        allocate: config.allocate,
        hint: config.hint,
        groupSize: generator.groupSize,
      });
      if (config.select.kind === 'ucb' && !config.task.mix)
        throw new ConfigError(
          'select.kind "ucb" (DUMP) chooses among the components of a task mixture: give task.mix',
          'select.kind',
        );
      const components =
        config.select.kind === 'ucb' && config.task.mix ? componentPools(pool, mixLabels(config.task.mix)) : undefined;
      return new Producer(config, sampler, tokenizer, pool, reward, generator, control, components, agent, gateway);
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
    const stats = emptyStats();
    const timings = { generate: 0, score: 0, produce: 0 };
    const info: Record<string, number> = { trees_error: 0, reward_failures: 0 };
    const control: ControlState = structuredClone(request.control ?? {});
    const promptStats = new PromptStats(config.promptStats, control.prompts);
    const quality = new QualityStep(
      control.head,
      {
        head: config.qualityHead,
        prune: config.prune,
        valueAllocation:
          (config.generate.kind === 'treepo' && config.generate.allocation === 'value') ||
          (config.generate.kind === 'agent' && config.generate.branching === 'trace'),
        maxResponseTokens: config.sampling.maxResponseTokens,
        samplerHiddenSize: this.sampler.capabilities.hiddenSize ?? 0,
        samplerEntropy: this.sampler.capabilities.entropy,
      },
      (id) => promptStats.posterior(id, request.step).mean,
      rng.fork('quality'),
    );
    // contrastive prompting: a fresh group's prompt carries earlier scored candidates (prompt tokens, mask 0)
    const exemplars = exemplarDB(config.contrastive, (control as { exemplars?: ExemplarState }).exemplars);
    const contextLength = config.engine.kind === 'embedded' ? config.model.contextLength : Infinity;
    if (exemplars) Object.assign(info, { contrastive_prompts: 0, contrastive_exemplars: 0 });
    const freshPrompt = (item: TaskItem): number[] => {
      if (!exemplars) return encodePrompt(item);
      const room = contextLength - config.sampling.maxResponseTokens;
      const { tokens, shown } = encodeContrastive(item, exemplars.select(item.id), encodePrompt, room);
      info.contrastive_prompts += shown > 0 ? 1 : 0;
      info.contrastive_exemplars += shown;
      return tokens;
    };
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
          step: request.step,
          stopTokens: stopTokens(this.tokenizer),
          maxResponseTokens: Math.max(1, config.sampling.maxResponseTokens - hintTokens),
          temperature: config.sampling.temperature,
          topP: config.sampling.topP,
          topK: config.sampling.topK,
          treeIdPrefix: `s${request.step}r${round}p`,
          stopAfterTrees: options.stopAfterTrees,
          quality: quality.hook,
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
    const take = (count: number) => data.take(count).map((i) => this.pool[i]);
    const skip = config.skip;
    const skipState = skip.kind === 'greso' ? (control.skip ?? { pEasy: skip.start, pHard: skip.start }) : undefined;
    info.prompts_skipped = 0;
    const skipRng = rng.fork('skip');
    const selectRng = rng.fork('select');
    if (config.select.kind !== 'sequential' && config.select.kind !== 'ucb') info.prompts_passed_over = 0;
    const ucb =
      config.select.kind === 'ucb' && this.components
        ? new UcbCurriculum(config.select, this.components, config.run.seed, (control as { ucb?: UcbState }).ucb)
        : undefined;
    const select = (count: number) => {
      if (ucb) return ucb.take(count, selectRng);
      if (config.select.kind !== 'sequential') {
        const out = selectByDifficulty(
          take,
          count,
          config.select,
          (id) => promptStats.posterior(id, request.step),
          selectRng,
        );
        info.prompts_passed_over += out.passed;
        return out.items;
      }
      if (skip.kind !== 'greso' || !skipState) return take(count);
      const out = selectSkipping(take, count, skip, skipState, (id) => promptStats.record(id), skipRng);
      info.prompts_skipped += out.skipped;
      return out.items;
    };
    const hinted = (item: TaskItem, hint: PromptHint, index: number): RolloutTree =>
      this.hintedTree(item, hint, `s${request.step}h${index}`, encodePrompt);
    const out = await this.control.collect(config.run.promptsPerStep, request.carried, {
      select,
      grow,
      hinted,
      stats: promptStats,
      step: request.step,
      groupSize: this.generator.groupSize,
    });
    // the quality head learns first (its features use the prompt statistics before this step),
    // then every group completed this step (each tree once) updates the statistics
    const drawn = [...new Set(out.drawn)];
    Object.assign(info, quality.learn(drawn));
    if (quality.state) control.head = quality.state;
    for (const tree of drawn) {
      if (!isComplete(tree) || hasError(tree) || tree.meta?.hint) continue;
      promptStats.observe(tree.itemId, leaves(tree).map(correctness), request.step);
    }
    control.prompts = promptStats.state;
    if (exemplars) {
      for (const tree of drawn) {
        if (!isComplete(tree) || hasError(tree) || tree.meta?.hint) continue;
        const candidates = leaves(tree).map((l) => ({
          text: this.tokenizer.decode(responseTokens(tree, l.id)),
          score: l.reward ?? 0,
        }));
        exemplars.observe(tree.itemId, candidates, request.step);
      }
      (control as { exemplars?: ExemplarState }).exemplars = exemplars.state;
    }
    if (ucb) {
      for (const tree of drawn)
        if (isComplete(tree) && !hasError(tree) && !tree.meta?.hint)
          ucb.observe(
            componentOfId(tree.itemId),
            leaves(tree).map((l) => l.reward ?? 0),
          );
      (control as { ucb?: UcbState }).ucb = ucb.state;
      Object.assign(info, ucb.info());
    }
    const means = out.batch
      .filter((b) => !hasError(b.tree))
      .map((b) => {
        const ls = leaves(b.tree);
        return ls.reduce((a, l) => a + correctness(l), 0) / Math.max(1, ls.length);
      });
    if (skip.kind === 'greso' && skipState) {
      control.skip = adaptSkip(skipState, means, skip);
      info.skip_p_easy = control.skip.pEasy;
      info.skip_p_hard = control.skip.pHard;
    }
    if (config.prune.kind === 'arrol') Object.assign(info, { pruned_paths: 0, pruned_tokens: 0 });
    Object.assign(info, batchInfo(out.batch, drawn));
    timings.produce = Date.now() - started;
    return {
      step: request.step,
      batch: out.batch,
      drawn: out.drawn,
      carry: out.carry,
      data: data.state,
      control,
      stats,
      info: { ...info, ...out.info },
      timings,
      weightVersion: version,
    };
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

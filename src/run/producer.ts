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
import type { RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import { controlFromConfig, type CarriedTree, type ControlStrategy, type GrowEntry } from '../control/index.js';
import type { Sampler, TextTokenizer } from '../engine/types.js';
import { rewardFromConfig } from '../filter/registry.js';
import { scoreTrees } from '../filter/score-trees.js';
import type { RewardFunction } from '../filter/types.js';
import { generatorFromConfig, type GenerateStats, type Generator } from '../generate/index.js';
import { growSafely } from '../generate/safe.js';
import { emptyStats } from '../generate/types.js';
import { DataOrder, type DataOrderState } from '../replay/data-order.js';
import { getTask } from '../tasks/index.js';
import type { ArborConfig } from './config.js';
import { promptEncoder } from './prompts.js';

export interface ProduceRequest {
  /** The learner step this batch is for. */
  step: number;
  /** Weight version the sampler must hold (checked; undefined for remote samplers, which serve what they hold). */
  version?: number;
  /** Trees the store carried over (partial and ready), oldest first. */
  carried: CarriedTree[];
  /** Select-stage position before this batch. */
  data: DataOrderState;
}

export interface ProduceResult {
  step: number;
  batch: Array<{ tree: RolloutTree; item: TaskItem }>;
  /** Every tree grown or continued (for metrics and logged trees). */
  drawn: RolloutTree[];
  carry: CarriedTree[];
  data: DataOrderState;
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
  ) {}

  static async create(config: ArborConfig, sampler: Sampler, tokenizer: TextTokenizer): Promise<Producer> {
    const task = getTask(config.task.name, config.task.options);
    await task.prepare?.();
    const reward = rewardFromConfig(config.reward, { taskReward: task.reward, safety: { timeoutMs: config.reward.timeoutMs, failureReward: config.reward.failureReward } });
    const pool = task.makeItems('train', config.run.trainItems, config.run.seed);
    return new Producer(config, sampler, tokenizer, pool, reward, generatorFromConfig(config.generate), controlFromConfig(config.control));
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
    if (request.version !== undefined && version !== request.version) throw new Error(`producer: sampler holds weight version ${version}, step ${request.step} needs ${request.version}`);
    const { config } = this;
    const data = new DataOrder(this.pool.length, config.run.seed, { ...request.data });
    const rng = new Rng(config.run.seed).fork(`step/${request.step}`);
    const encodePrompt = promptEncoder(this.tokenizer, config.engine.chatTemplate);
    const stats = emptyStats();
    const timings = { generate: 0, score: 0, produce: 0 };
    const info: Record<string, number> = { trees_error: 0, reward_failures: 0 };
    const grow = async (entries: GrowEntry[], round: number, options: { stopAfterTrees?: number } = {}): Promise<RolloutTree[]> => {
      let t = Date.now();
      const grown = await growSafely(this.generator, entries.map((e) => ({ item: e.item, promptTokens: e.tree ? e.tree.nodes['0'].tokens : encodePrompt(e.item), tree: e.tree })), {
        sampler: this.sampler, rng: rng.fork(`generate/${round}`), step: request.step, stopTokens: [this.tokenizer.eos],
        maxResponseTokens: config.sampling.maxResponseTokens, temperature: config.sampling.temperature, topP: config.sampling.topP, topK: config.sampling.topK,
        treeIdPrefix: `s${request.step}r${round}p`, stopAfterTrees: options.stopAfterTrees,
      });
      timings.generate += Date.now() - t;
      for (const k of Object.keys(stats) as Array<keyof GenerateStats>) stats[k] += grown.stats[k];
      info.trees_error += grown.errors;
      t = Date.now();
      const items = new Map(entries.map((e) => [e.item.id, e.item]));
      const scored = await scoreTrees(grown.trees, items, this.reward, { decode: (tokens) => this.tokenizer.decode(tokens), concurrency: config.reward.concurrency, timeoutMs: config.reward.timeoutMs, failureReward: config.reward.failureReward });
      info.reward_failures += scored.failed;
      timings.score += Date.now() - t;
      return grown.trees;
    };
    const out = await this.control.collect(config.run.promptsPerStep, request.carried, {
      select: (count) => data.take(count).map((i) => this.pool[i]),
      grow,
    });
    timings.produce = Date.now() - started;
    return {
      step: request.step,
      batch: out.batch,
      drawn: out.drawn,
      carry: out.carry,
      data: data.state,
      stats,
      info: { ...info, ...out.info },
      timings,
      weightVersion: version,
    };
  }
}

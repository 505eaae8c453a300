/**
 * The synchronous RL step loop on the embedded engine: select prompts → grow trees (Generate) →
 * score leaves (Filter) → optional dynamic sampling (Control) → advantages and datums (Optimize) →
 * forward/backward + AdamW (Trainer) → publish weights → log. Every random choice derives from
 * (run.seed, step), the data order is (epoch, cursor), and checkpoints hold weights + optimiser, so
 * `--resume` reproduces an uninterrupted run exactly. Writes the run directory (rundir.ts).
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { ConfigError } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import { leaves, type RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import { dynamicSampling } from '../control/dynamic-sampling.js';
import { learningRateAt } from '../engine/nano/adamw.js';
import { NanoTrainer } from '../engine/nano/trainer.js';
import { loadCheckpoint, writeCheckpointMeta } from '../engine/nano/checkpoint.js';
import { rewardFromConfig } from '../filter/registry.js';
import { scoreBatch } from '../filter/reward.js';
import { generatorFromConfig, type GenerateStats } from '../generate/index.js';
import { buildDatums, computeAdvantages, lossFromConfig, type AdvantagedTrajectory } from '../optimize/index.js';
import { getTask } from '../tasks/index.js';
import { parseConfig, type ArborConfig } from './config.js';
import { DataOrder, type DataOrderState } from './data-order.js';
import { buildEmbedded, prepareStart } from './embedded.js';
import { promptEncoder } from './prompts.js';
import { buildRemote } from './remote.js';
import { evaluate, type EvalResult } from './evaluate.js';
import { Progress, formatSeconds } from './progress.js';
import { writeReport } from './report.js';
import { RunDir, type StepMetrics } from './rundir.js';

export interface TrainOptions {
  /** Continue the run in this directory from its last checkpoint. */
  resume?: string;
  /** Replace run.steps (e.g. to extend a resumed run). */
  steps?: number;
  /** No progress output. */
  quiet?: boolean;
  /** Allow reusing a non-empty run directory (its files are overwritten). */
  force?: boolean;
}

export interface RunSummary {
  run_dir: string;
  heldout_acc_start: number;
  heldout_acc_end: number;
  pass_at_k_start: number | null;
  pass_at_k_end: number | null;
  /** Held-out accuracy of one sample at the rollout temperature (what RL optimises), when pass@k is on. */
  heldout_sample_acc_start: number | null;
  heldout_sample_acc_end: number | null;
  wall_s: number;
  tokens_decoded: number;
  prefix_tokens_reused: number;
  steps: number;
  generator: string;
  warm_start: string;
}

interface LoopState {
  step: number;
  /** Optimiser updates so far (drives the learning-rate schedule). */
  optimizerSteps: number;
  data: DataOrderState;
  tokensDecoded: number;
  prefixTokensReused: number;
  promptTokensComputed: number;
  wallSeconds: number;
  evalStart: { greedy: number; passAtK: number | null; sample?: number | null };
}

export async function train(inputConfig: ArborConfig | undefined, options: TrainOptions = {}): Promise<RunSummary> {
  const progress = new Progress(options.quiet);
  let config: ArborConfig;
  let dir: RunDir;
  let resumeStep = 0;
  if (options.resume) {
    dir = new RunDir(options.resume);
    config = parseConfig(YAML.parse(dir.readConfigText()), join(options.resume, 'config.resolved.yaml'));
    const steps = dir.checkpoints();
    if (!steps.length) throw new ConfigError(`${options.resume}: no checkpoint to resume from (checkpoints/step-N/state.json)`);
    resumeStep = steps[steps.length - 1];
  } else {
    if (!inputConfig) throw new ConfigError('train: a config is required');
    config = inputConfig;
    dir = new RunDir(config.run.outDir ?? join('runs', config.run.name));
    if (existsSync(dir.path) && readdirSync(dir.path).length && !options.force) {
      throw new ConfigError(`${dir.path} already exists; resume it with --resume ${dir.path}, pass --force, or set run.name/run.outDir`, 'run.outDir');
    }
  }
  if (options.steps !== undefined) config = { ...config, run: { ...config.run, steps: options.steps } };
  if (!options.resume) dir.create(config);
  const started = Date.now();
  const task = getTask(config.task.name, config.task.options);
  await task.prepare?.();
  const reward = rewardFromConfig(config.reward, { taskReward: task.reward, safety: { timeoutMs: config.reward.timeoutMs, failureReward: config.reward.failureReward } });
  const remote = config.engine.kind === 'remote';
  const startDir = remote ? undefined : await prepareStart(config, task, progress);
  const engine = remote ? buildRemote(config) : await buildEmbedded(config, startDir);
  const { tokenizer, sampler, trainer } = engine;
  const modelDescription = 'model' in engine ? `model ${engine.model.parameterCount} params from ${engine.origin}` : engine.origin;
  const seed = config.run.seed;
  const pool = task.makeItems('train', config.run.trainItems, seed);
  const testItems = task.makeItems('test', config.run.evalCount, seed);
  const generator = generatorFromConfig(config.generate);
  const { loss, extras } = lossFromConfig(config.optimize.loss);
  if (extras.klCoef && (remote || !startDir)) throw new ConfigError('optimize.loss.klCoef > 0 needs the embedded engine with a warm-start or model.checkpoint as the reference policy', 'optimize.loss.klCoef');
  const reference = extras.klCoef && startDir ? new NanoTrainer((await loadCheckpoint(startDir)).model) : undefined;
  const encodePrompt = promptEncoder(tokenizer, config.engine.chatTemplate);
  const decode = (tokens: number[]) => tokenizer.decode(tokens);
  const stopTokens = [tokenizer.eos];
  const maxResponseTokens = config.sampling.maxResponseTokens;
  const evalAt = (step: number): Promise<EvalResult> =>
    evaluate(testItems, config.run.evalPassK, { sampler, encodePrompt, decode, stopTokens, maxResponseTokens, reward: task.reward, rng: new Rng(seed).fork(`eval/${step}`) });

  let state: LoopState;
  if (resumeStep > 0) {
    const ck = dir.checkpointDir(resumeStep);
    await trainer.loadState(join(ck, 'engine'));
    state = JSON.parse((await import('node:fs')).readFileSync(join(ck, 'state.json'), 'utf8')) as LoopState;
    dir.truncateMetrics(resumeStep);
    progress.line(`resuming ${dir.path} from step ${resumeStep}`);
  } else {
    progress.line(`run ${dir.path}: ${task.name}, ${generator.kind} (G=${generator.groupSize}), ${config.run.promptsPerStep} prompts/step, ${config.run.steps} steps, ${modelDescription}`);
    progress.update('evaluating the starting policy...');
    const e0 = await evalAt(0);
    state = { step: 0, optimizerSteps: 0, data: { epoch: 0, cursor: 0 }, tokensDecoded: 0, prefixTokensReused: 0, promptTokensComputed: 0, wallSeconds: 0, evalStart: { greedy: e0.greedyAccuracy, passAtK: e0.passAtK, sample: e0.sampleAccuracy } };
    dir.appendMetrics({ step: 0, eval_greedy_acc: e0.greedyAccuracy, eval_pass_at_k: e0.passAtK, eval_sample_acc: e0.sampleAccuracy, tokens_decoded_total: 0, wall_s: 0 });
    progress.line(`step 0: held-out greedy accuracy ${pct(e0.greedyAccuracy)}${e0.passAtK !== null ? `, pass@${e0.k} ${pct(e0.passAtK)}` : ''}`);
  }
  const data = new DataOrder(pool.length, seed, state.data);
  let lastEval: EvalResult | undefined;
  const loopStart = Date.now() - state.wallSeconds * 1000;
  const stepTimes: number[] = [];
  for (let step = state.step + 1; step <= config.run.steps; step++) {
    const stepStart = Date.now();
    const rng = new Rng(seed).fork(`step/${step}`);
    const timings = { generate: 0, score: 0, advantage: 0, train: 0 };
    const stats: GenerateStats = { tokensDecoded: 0, prefixTokensReused: 0, promptTokensComputed: 0, trajectories: 0, samplerCalls: 0, wallMs: 0 };
    const drawRound = async (count: number, round: number): Promise<RolloutTree[]> => {
      const items = data.take(count).map((i) => pool[i]);
      let t = Date.now();
      const grown = await generator.grow(items.map((item) => ({ item, promptTokens: encodePrompt(item) })), {
        sampler, rng: rng.fork(`generate/${round}`), step, stopTokens, maxResponseTokens,
        temperature: config.sampling.temperature, topP: config.sampling.topP, topK: config.sampling.topK, treeIdPrefix: `s${step}r${round}p`,
      });
      timings.generate += Date.now() - t;
      for (const k of Object.keys(stats) as Array<keyof GenerateStats>) stats[k] += grown.stats[k];
      t = Date.now();
      await scoreTrees(grown.trees, items);
      timings.score += Date.now() - t;
      return grown.trees;
    };
    const scoreTrees = async (trees: RolloutTree[], items: TaskItem[]) => {
      const byId = new Map(items.map((i) => [i.id, i]));
      const ls = trees.flatMap((tree) => leaves(tree).map((leaf) => ({ tree, leaf })));
      const inputs = ls.map(({ tree, leaf }) => {
        const response = responseTokens(tree, leaf.id);
        return { item: byId.get(tree.itemId)!, response: decode(response), responseTokens: response.length };
      });
      const results = await scoreBatch(reward, inputs, { concurrency: config.reward.concurrency, timeoutMs: config.reward.timeoutMs, failureReward: config.reward.failureReward });
      ls.forEach(({ leaf }, i) => {
        leaf.reward = results[i].reward;
        leaf.rewardInfo = { components: results[i].components, info: results[i].info };
      });
    };
    let trees: RolloutTree[];
    let dropped = 0;
    let rounds = 1;
    let allTrees: RolloutTree[];
    if (config.optimize.dynamicSampling.enabled) {
      const ds = await dynamicSampling({ targetGroups: config.run.promptsPerStep, maxRounds: config.optimize.dynamicSampling.maxRounds }, drawRound);
      trees = ds.trees;
      dropped = ds.dropped;
      rounds = ds.rounds;
      allTrees = ds.drawn;
    } else {
      trees = await drawRound(config.run.promptsPerStep, 0);
      allTrees = trees;
    }
    // Optimize + train
    let t = Date.now();
    const advantaged = computeAdvantages(trees, config.optimize.advantage);
    timings.advantage = Date.now() - t;
    t = Date.now();
    const chunks = splitByTree(advantaged, config.trainer.updatesPerStep);
    let lossSum = 0;
    const metricSums: Record<string, number> = {};
    let gradNorm = 0;
    let lr = 0;
    for (const chunk of chunks) {
      const datums = buildDatums(chunk, { aggregation: config.optimize.aggregation, maxResponseTokens });
      if (!datums.length) continue;
      if (reference) {
        const ref = await reference.logprobs(datums);
        datums.forEach((d, i) => (d.referenceLogprobs = ref[i]));
      }
      const out = await trainer.forwardBackward(datums, loss, extras);
      lossSum += out.loss;
      for (const [k, v] of Object.entries(out.metrics)) metricSums[k] = (metricSums[k] ?? 0) + v / chunks.length;
      lr = learningRateAt(state.optimizerSteps, {
        kind: config.trainer.schedule, learningRate: config.trainer.learningRate, warmupSteps: config.trainer.warmupSteps,
        totalSteps: config.run.steps * config.trainer.updatesPerStep, minRatio: config.trainer.minLearningRateRatio,
      });
      const r = await trainer.optimStep({ learningRate: lr, beta1: config.trainer.beta1, beta2: config.trainer.beta2, eps: config.trainer.eps, weightDecay: config.trainer.weightDecay, gradClipNorm: config.trainer.gradClipNorm });
      gradNorm = r.gradNorm;
      state.optimizerSteps++;
    }
    await trainer.saveForSampler();
    timings.train = Date.now() - t;
    // bookkeeping
    state.tokensDecoded += stats.tokensDecoded;
    state.prefixTokensReused += stats.prefixTokensReused;
    state.promptTokensComputed += stats.promptTokensComputed;
    const leafRewards = allTrees.flatMap((tree) => leaves(tree).map((l) => l));
    const rewardMean = mean(leafRewards.map((l) => l.reward ?? 0));
    const accuracy = mean(leafRewards.map((l) => ((l.rewardInfo?.components.correct ?? l.reward ?? 0) > 0.5 ? 1 : 0)));
    const responseLength = mean(advantaged.map((a) => a.trajectory.tokens.length));
    const metrics: StepMetrics = {
      step,
      reward_mean: rewardMean,
      accuracy,
      tokens_decoded: stats.tokensDecoded,
      tokens_decoded_total: state.tokensDecoded,
      prefix_tokens_reused: stats.prefixTokensReused,
      prompt_tokens_computed: stats.promptTokensComputed,
      prefix_reuse_ratio: stats.prefixTokensReused / Math.max(1, stats.prefixTokensReused + stats.promptTokensComputed),
      trajectories: stats.trajectories,
      sampler_calls: stats.samplerCalls,
      groups_dropped: dropped,
      sampling_rounds: rounds,
      response_length: responseLength,
      loss: lossSum,
      clip_fraction: metricSums.clip_fraction ?? 0,
      approx_kl: metricSums.approx_kl ?? 0,
      entropy: metricSums.entropy ?? 0,
      grad_norm: gradNorm,
      lr,
      ms_generate: timings.generate,
      ms_score: timings.score,
      ms_advantage: timings.advantage,
      ms_train: timings.train,
    };
    const isLast = step === config.run.steps;
    if ((config.run.evalEvery > 0 && step % config.run.evalEvery === 0) || isLast) {
      progress.update(`step ${step}: evaluating...`);
      const te = Date.now();
      lastEval = await evalAt(step);
      metrics.eval_greedy_acc = lastEval.greedyAccuracy;
      metrics.eval_pass_at_k = lastEval.passAtK;
      metrics.eval_sample_acc = lastEval.sampleAccuracy;
      metrics.ms_eval = Date.now() - te;
    }
    state.step = step;
    state.data = data.state;
    state.wallSeconds = (Date.now() - loopStart) / 1000;
    metrics.wall_s = state.wallSeconds;
    dir.appendMetrics(metrics);
    if (config.run.logTreesEvery > 0 && (step % config.run.logTreesEvery === 0 || step === 1 || isLast)) dir.writeTrees(step, allTrees);
    if ((config.run.checkpointEvery > 0 && step % config.run.checkpointEvery === 0) || isLast) {
      const ck = dir.checkpointDir(step);
      await trainer.saveState(join(ck, 'engine'));
      // the embedded engine's state directory is also a loadable checkpoint (arbor eval / serve / sft)
      if ('model' in engine) writeCheckpointMeta(join(ck, 'engine'), engine.model, engine.tokenizer);
      dir.writeJson(join('checkpoints', `step-${step}`, 'state.json'), state);
    }
    stepTimes.push((Date.now() - stepStart) / 1000);
    const spm = mean(stepTimes.slice(-5));
    const line = `${progress.stepPrefix(step, config.run.steps, spm)} reward ${rewardMean.toFixed(3)} acc ${pct(accuracy)} decoded ${stats.tokensDecoded} reused ${stats.prefixTokensReused}` +
      ` | gen ${(timings.generate / 1000).toFixed(1)}s score ${(timings.score / 1000).toFixed(1)}s train ${(timings.train / 1000).toFixed(1)}s` +
      (metrics.eval_greedy_acc !== undefined ? ` | held-out greedy ${pct(metrics.eval_greedy_acc as number)}${lastEval?.sampleAccuracy != null ? ` sampled ${pct(lastEval.sampleAccuracy)}` : ''}` : '');
    if (metrics.eval_greedy_acc !== undefined || isLast || step === 1) progress.line(line);
    else progress.update(line);
  }
  const end = lastEval ?? (await evalAt(state.step));
  const summary: RunSummary = {
    run_dir: dir.path,
    heldout_acc_start: state.evalStart.greedy,
    heldout_acc_end: end.greedyAccuracy,
    pass_at_k_start: state.evalStart.passAtK,
    pass_at_k_end: end.passAtK,
    heldout_sample_acc_start: state.evalStart.sample ?? null,
    heldout_sample_acc_end: end.sampleAccuracy,
    wall_s: (Date.now() - started) / 1000,
    tokens_decoded: state.tokensDecoded,
    prefix_tokens_reused: state.prefixTokensReused,
    steps: state.step,
    generator: generator.kind,
    warm_start: engine.origin,
  };
  dir.writeJson('summary.json', summary);
  if ('close' in sampler) await sampler.close();
  writeReport(dir, tokenizer);
  const sampled = summary.heldout_sample_acc_start !== null && summary.heldout_sample_acc_end !== null ? `, sampled ${pct(summary.heldout_sample_acc_start)} → ${pct(summary.heldout_sample_acc_end)}` : '';
  progress.line(`done in ${formatSeconds(summary.wall_s)}: held-out greedy accuracy ${pct(summary.heldout_acc_start)} → ${pct(summary.heldout_acc_end)}${sampled}; ${summary.tokens_decoded} tokens decoded; report ${join(dir.path, 'report.html')}`);
  return summary;
}

function responseTokens(tree: RolloutTree, leafId: string): number[] {
  const out: number[] = [];
  const chain: string[] = [];
  for (let id: string | null = leafId; id !== null && id !== '0'; id = tree.nodes[id].parent) chain.push(id);
  for (let i = chain.length - 1; i >= 0; i--) out.push(...tree.nodes[chain[i]].tokens);
  return out;
}

/** Split trajectories into `parts` mini-batches without splitting a tree's group. */
function splitByTree(items: AdvantagedTrajectory[], parts: number): AdvantagedTrajectory[][] {
  const byTree = new Map<string, AdvantagedTrajectory[]>();
  for (const a of items) {
    const list = byTree.get(a.trajectory.treeId) ?? [];
    list.push(a);
    byTree.set(a.trajectory.treeId, list);
  }
  const groups = [...byTree.values()];
  const n = Math.min(parts, groups.length) || 1;
  const out: AdvantagedTrajectory[][] = Array.from({ length: n }, () => []);
  groups.forEach((g, i) => out[i % n].push(...g));
  return out;
}

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

function pct(x: number | null): string {
  return x === null ? 'n/a' : `${(100 * x).toFixed(1)}%`;
}

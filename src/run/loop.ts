/**
 * `train()`: the RL run as a composition of the lifecycle stages around the rollout store.
 *
 *   producers: Select → Control → Generate → Filter ─► store ─► learner: Optimize → Trainer → publish
 *
 * The producer (producer.ts) runs in-process (sync mode) or in a worker thread (async mode); the
 * pipeline (pipeline.ts) decides which weight version each batch is generated with and keeps
 * production at most run.maxStaleness steps ahead; the learner (learner.ts) trains and measures
 * staleness; this file opens the run, loops over steps, evaluates, logs and checkpoints. Every random
 * choice derives from (run.seed, step), so a run — async and partial rollouts included — is
 * reproducible from its config and `--resume` equals an uninterrupted run.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { ArborError, ConfigError, DataError, EngineCallError, NumericsError } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import { hasError } from '../core/tree.js';
import { buildEngine, type Engine } from '../engine/build.js';
import { RolloutStore, type RolloutStoreOptions } from '../replay/store.js';
import { Replay, replayMetrics } from '../replay/replay.js';
import { taskFromConfig } from '../tasks/index.js';
import { parseConfig, type ArborConfig } from './config.js';
import { evaluate, type EvalResult } from './evaluate.js';
import { evaluateAgent } from './evaluate-agent.js';
import { agentRuntime, openAgentEnv } from './agent-runtime.js';
import { checkGatewayConfig, openGatewayAgent } from './gateway-runtime.js';
import { isGatewayAgent } from '../env/index.js';
import type { TaskItem } from '../core/types.js';
import type { Task } from '../tasks/types.js';
import { InProcessHost, WorkerHost } from './hosts.js';
import { Learner } from './learner.js';
import { RolloutPipeline, type ProducerHost } from './pipeline.js';
import { Producer } from './producer.js';
import { Progress, formatSeconds } from './progress.js';
import { fitPrompts, promptEncoder, skippedLine, stopTokens, toolOffer } from './prompts.js';
import { writeReport } from '../ui/report.js';
import { RUN_DIR_ENTRIES, RunDir, sftMetrics } from './rundir.js';
import { loadRunState, saveRunState, type LoopState } from './run-state.js';
import { stepLine, stepMetrics } from './step-log.js';
import { warmStartFor } from './warm-start.js';
import { openShare, type Share } from './share.js';
import { shapingNeeds } from '../optimize/advantages/shaping.js';

export interface TrainOptions {
  /** Continue the run in this directory from its last checkpoint. */
  resume?: string;
  /** Replace run.steps (e.g. to extend a resumed run). */
  steps?: number;
  /** No progress output. */
  quiet?: boolean;
  /** Allow reusing a non-empty run directory (its files are overwritten). */
  force?: boolean;
  /** Aborting it (the CLI does on SIGINT) closes the environments and the engine, and train() rejects. */
  signal?: AbortSignal;
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
  mode: 'sync' | 'async';
  max_staleness: number;
  warm_start: string;
}

export async function train(inputConfig: ArborConfig | undefined, options: TrainOptions = {}): Promise<RunSummary> {
  const started = Date.now();
  const progress = new Progress(options.quiet);
  const { config, dir, resumeSteps } = openRun(inputConfig, options);
  const task = await taskFromConfig(config.task);
  // everything opened from here on is closed on every exit path: an error at load or in a step, SIGINT
  const opened = new OpenResources();
  const interrupted = interruption(options.signal);
  const body = runOpened({ config, dir, resumeSteps, task, progress, started }, opened);
  // an interrupted body fails later on the closed resources: that failure is not reported twice
  body.catch(() => {});
  let failed = true;
  try {
    const summary = await Promise.race([body, interrupted.promise]);
    failed = false;
    return summary;
  } finally {
    interrupted.dispose();
    await opened.closeAll(failed);
  }
}

/** A run whose directory, config and task are open (what `runOpened` starts from). */
interface OpenRun {
  config: ArborConfig;
  dir: RunDir;
  resumeSteps: number[];
  task: Task;
  progress: Progress;
  /** Date.now() when train() began. */
  started: number;
}

/** The run after `openRun`: every resource it opens is registered in `opened` as soon as it exists. */
async function runOpened(run: OpenRun, opened: OpenResources): Promise<RunSummary> {
  const { config, dir, resumeSteps, task, progress } = run;
  // env.kind agent: a config it cannot run is refused before the warm start
  if (isGatewayAgent(config.env)) checkGatewayConfig(config);
  const agentEnv = await openAgentEnv(config);
  const closeAgentEnv = opened.add(async () => agentEnv?.factory.close());
  const warmStart = warmStartFor(config, task, agentEnv);
  const engine = await buildEngine(config, {
    warmStart,
    needReference: config.optimize.loss.klCoef > 0 || shapingNeeds(config.optimize.advantage.shaping).reference,
    log: (l) => progress.line(l),
    update: (l, milestone) => progress.update(l, milestone),
    // a warm start trained now logs its steps ahead of step 0 (a resumed run keeps those of its first start)
    sftStep: resumeSteps.length ? undefined : (p) => dir.appendMetrics(sftMetrics(p)),
  });
  const closeEngine = opened.add(() => engine.close());
  // env.kind agent: held-out episodes of the user's agent run through a gateway of their own
  const gateway = await openGatewayAgent(config, engine.sampler, engine.tokenizer, { log: (l) => progress.line(l) });
  const closeGateway = opened.add(async () => gateway?.close());
  const agent = agentEnv && agentRuntime(agentEnv, engine.tokenizer, config);
  const encodePrompt = agent
    ? (item: TaskItem) => agent.encodePrompt(item, '')
    : promptEncoder(engine.tokenizer, config.engine.chatTemplate, config.engine.chatTemplateKwargs);
  // the same fitting as `arbor eval` (prompts.ts); the tools line alone must leave room too
  const offer = agent && toolOffer(agent.format, agent.tools, (text) => engine.tokenizer.encode(text));
  const contextLength = engine.embedded ? config.model.contextLength : undefined;
  const testPool = task.makeItems('test', config.run.evalCount, config.run.seed);
  const fitted = fitPrompts(testPool, encodePrompt, contextLength, config.task.overlong, 'held-out', offer);
  const skipped = skippedLine(fitted, 'held-out');
  if (skipped) progress.line(skipped);
  const testItems = fitted.items;
  const evalContext = {
    sampler: engine.sampler,
    decode: (t: number[]) => engine.tokenizer.decode(t),
    stopTokens: stopTokens(engine.tokenizer),
    maxResponseTokens: config.sampling.maxResponseTokens,
    reward: task.reward,
    firstWrongStep: task.firstWrongStep?.bind(task),
    progress: (text: string, milestone: boolean) => progress.update(text, milestone),
  };
  const evalAt = (step: number): Promise<EvalResult> => {
    const rng = new Rng(config.run.seed).fork(`eval/${step}`);
    if ((agent || gateway) && config.generate.kind === 'agent') {
      const options = config.generate;
      return evaluateAgent(testItems, config.run.evalPassK, { ...evalContext, rng, agent, gateway, options });
    }
    return evaluate(testItems, config.run.evalPassK, { ...evalContext, rng, encodePrompt });
  };
  const storeOptions = { maxInMemory: config.store.maxInMemory, spillFile: join(dir.path, 'store-spill.jsonl') };
  let state: LoopState;
  let store: RolloutStore;
  if (resumeSteps.length) {
    ({ state, store } = await resumeNewestUsable(dir, resumeSteps, engine, storeOptions, progress));
    dir.truncateMetrics(state.step);
    progress.line(`resuming ${dir.path} from step ${state.step} (${store.count()} trees in the store)`);
  } else {
    state = await startFresh(run, engine, evalAt);
    store = new RolloutStore(storeOptions);
  }
  // rollout replay buffers (src/replay/replay.ts), restored from the checkpoint resumed from
  const replay = Replay.open(
    config.replay,
    config.run.seed,
    config.trainer.updatesPerStep,
    resumeSteps.length ? dir.checkpointDir(state.step) : undefined,
  );
  const host = await startHost(config, engine);
  let pipeline: RolloutPipeline | undefined;
  // the pipeline closes its host (and the producer's environments) once production in flight is done
  const closePipeline = opened.add(() => (pipeline ? pipeline.close() : host.close()));
  const version = state.baseVersion + state.step;
  pipeline = new RolloutPipeline(
    host,
    store,
    {
      maxStaleness: config.run.mode === 'async' ? config.run.maxStaleness : 0,
      // up to k batches beyond the last step are produced too and kept in the final checkpoint, so a
      // run extended with --resume --steps continues exactly as if it had been longer from the start
      steps: config.run.steps + (config.run.mode === 'async' ? config.run.maxStaleness : 0),
      baseVersion: state.baseVersion,
      pinVersions: config.engine.kind === 'embedded',
      snapshot: host instanceof WorkerHost ? engine.embedded!.weights : undefined,
    },
    { nextStep: state.pipeline.nextStep, data: state.pipeline.data, control: state.pipeline.control },
    state.pipeline.produced,
    version,
  );
  // SAPO rollout sharing (src/run/share.ts): undefined unless share.dir is set
  const share = await openShare(config, task, engine, encodePrompt);
  const lastEval = await runSteps({ config, dir, engine, pipeline, state, progress, evalAt, replay, share });
  await closePipeline();
  const finalEvalStart = Date.now();
  const end = lastEval ?? (await evalAt(state.step));
  await closeAgentEnv();
  await closeGateway();
  const summary = summarize(config, dir, engine, state, end, (Date.now() - finalEvalStart) / 1000);
  dir.writeJson('summary.json', summary);
  await closeEngine();
  writeReport(dir, engine.tokenizer);
  const sampled =
    summary.heldout_sample_acc_start !== null && summary.heldout_sample_acc_end !== null
      ? `, sampled ${pct(summary.heldout_sample_acc_start)} → ${pct(summary.heldout_sample_acc_end)}`
      : '';
  progress.line(
    `done in ${formatSeconds(summary.wall_s)}: held-out greedy accuracy ${pct(summary.heldout_acc_start)} → ` +
      `${pct(summary.heldout_acc_end)}${sampled}; ${summary.tokens_decoded} tokens decoded; ` +
      `report ${join(dir.path, 'report.html')}`,
  );
  return summary;
}

/** A run's step 0: its description, the starting policy's evaluation (metrics row 0) and the initial state. */
async function startFresh(
  run: OpenRun,
  engine: Engine,
  evalAt: (step: number) => Promise<EvalResult>,
): Promise<LoopState> {
  const { config, dir, task, progress, started } = run;
  progress.line(
    `run ${dir.path}: ${task.name}, ${config.generate.kind} (G=${config.generate.groupSize}), ` +
      `${config.run.promptsPerStep} prompts/step, ${config.run.steps} steps, ${config.run.mode}` +
      `${config.run.mode === 'async' ? ` (max staleness ${config.run.maxStaleness})` : ''}, ` +
      `control ${config.control.kind}, ${engine.description}`,
  );
  progress.update('evaluating the starting policy...');
  const e0 = await evalAt(0);
  const baseVersion = (await engine.trainer.saveForSampler()).weightVersion;
  const state: LoopState = {
    step: 0,
    optimizerSteps: 0,
    baseVersion,
    tokensDecoded: 0,
    prefixTokensReused: 0,
    promptTokensComputed: 0,
    wallSeconds: 0,
    setupSeconds: (Date.now() - started) / 1000,
    failedSteps: 0,
    evalStart: { greedy: e0.greedyAccuracy, passAtK: e0.passAtK, sample: e0.sampleAccuracy },
    pipeline: { nextStep: 1, data: { epoch: 0, cursor: 0 }, control: {}, produced: [] },
  };
  dir.appendMetrics({
    step: 0,
    eval_greedy_acc: e0.greedyAccuracy,
    eval_pass_at_k: e0.passAtK,
    eval_sample_acc: e0.sampleAccuracy,
    ...(e0.extra ?? {}),
    tokens_decoded_total: 0,
    wall_s: 0,
  });
  progress.line(
    `step 0: held-out greedy accuracy ${pct(e0.greedyAccuracy)}${e0.passAtK !== null ? `, pass@${e0.k} ${pct(e0.passAtK)}` : ''}`,
  );
  return state;
}

interface StepContext {
  config: ArborConfig;
  dir: RunDir;
  engine: Engine;
  pipeline: RolloutPipeline;
  state: LoopState;
  progress: Progress;
  evalAt: (step: number) => Promise<EvalResult>;
  replay: Replay;
  share?: Share;
}

/** The step loop: wait for the batch, train, publish, evaluate, log, checkpoint. */
async function runSteps(ctx: StepContext): Promise<EvalResult | undefined> {
  const { config, dir, engine, pipeline, state, progress } = ctx;
  const learner = new Learner(engine, config);
  const loopStart = Date.now() - state.wallSeconds * 1000;
  const stepTimes: number[] = [];
  let lastEval: EvalResult | undefined;
  pipeline.pump();
  for (let step = state.step + 1; step <= config.run.steps; step++) {
    // a step of in-process work may never leave the microtask queue: let signals (SIGINT) and I/O in
    await new Promise<void>((resolve) => setImmediate(resolve));
    const stepStart = Date.now();
    const { entries, meta } = await pipeline.batch(step);
    const trees = entries.map((e) => e.tree);
    const version = state.baseVersion + step - 1;
    // SAPO (src/run/share.ts): publish this batch, train on I of its groups and J of peers', re-scored here
    const shared =
      ctx.share &&
      (await ctx.share.mix(
        step,
        entries.filter((e) => !hasError(e.tree)),
        version,
      ));
    const usable = shared ? shared.trees : trees.filter((t) => !hasError(t));
    const t = Date.now();
    const learned = usable.length
      ? await ctx.replay.train(learner, usable, version, state.optimizerSteps, step)
      : undefined;
    state.optimizerSteps += learned?.updates ?? 0;
    await engine.trainer.saveForSampler();
    const trainMs = Date.now() - t;
    // a step fails when no tree was usable, or when every update it tried was non-finite (skipped)
    const numericsFailed = !!learned && learned.nonFiniteUpdates > 0 && learned.updates === 0;
    state.failedSteps = usable.length && !numericsFailed ? 0 : state.failedSteps + 1;
    state.tokensDecoded += meta.stats.tokensDecoded;
    state.prefixTokensReused += meta.stats.prefixTokensReused;
    state.promptTokensComputed += meta.stats.promptTokensComputed;
    const metrics = stepMetrics(step, trees, meta, learned, trainMs, state);
    // remote engines: sampler servers healthy, requests retried, servers resynced; trainer retries
    Object.assign(metrics, replayMetrics(learned), shared?.metrics, engine.stepMetrics?.());
    const isLast = step === config.run.steps;
    if ((config.run.evalEvery > 0 && step % config.run.evalEvery === 0) || isLast) {
      progress.update(`step ${step}: evaluating...`);
      const te = Date.now();
      lastEval = await ctx.evalAt(step);
      Object.assign(metrics, {
        eval_greedy_acc: lastEval.greedyAccuracy,
        eval_pass_at_k: lastEval.passAtK,
        eval_sample_acc: lastEval.sampleAccuracy,
        ...(lastEval.extra ?? {}),
        ms_eval: Date.now() - te,
      });
    }
    state.step = step;
    if ((config.run.checkpointEvery > 0 && step % config.run.checkpointEvery === 0) || isLast)
      await checkpoint(ctx, step);
    state.wallSeconds = (Date.now() - loopStart) / 1000;
    metrics.wall_s = state.wallSeconds;
    dir.appendMetrics(metrics);
    if (config.run.logTreesEvery > 0 && (step % config.run.logTreesEvery === 0 || step === 1 || isLast))
      dir.writeTrees(step, meta.drawn);
    stepTimes.push((Date.now() - stepStart) / 1000);
    const line = stepLine(progress.stepPrefix(step, config.run.steps, mean(stepTimes.slice(-5))), metrics, lastEval);
    if (metrics.eval_greedy_acc !== undefined || isLast || step === 1) progress.line(line);
    else progress.update(line);
    if (numericsFailed) {
      progress.line(
        `step ${step}: the loss or gradient was NaN or infinite in every update; nothing applied (the weights keep their last good state)`,
      );
      if (state.failedSteps >= config.run.maxFailedSteps)
        throw new NumericsError(
          `stopping: ${state.failedSteps} consecutive steps whose updates were all NaN or infinite (run.maxFailedSteps ${config.run.maxFailedSteps})`,
        );
    }
    if (!usable.length) {
      const reasons = [
        ...new Set(
          trees.flatMap((tr) =>
            Object.values(tr.nodes)
              .filter((n) => n.error)
              .map((n) => n.error!),
          ),
        ),
      ].slice(0, 3);
      progress.line(
        `step ${step}: no usable tree (${trees.length} in the batch${reasons.length ? `; errors: ${reasons.join(' | ')}` : ''}); skipped`,
      );
      if (state.failedSteps >= config.run.maxFailedSteps)
        throw new ArborError(
          `stopping: ${state.failedSteps} consecutive steps without a usable tree ` +
            `(run.maxFailedSteps ${config.run.maxFailedSteps}); last errors: ${reasons.join(' | ') || 'none recorded'}`,
        );
    }
    // production of the next batch(es) starts once this step is fully done (in sync mode nothing
    // interleaves with evaluation; in async mode the worker is already busy with earlier batches)
    pipeline.published(version + 1);
  }
  return lastEval;
}

/** Drain production in flight (nothing produced is lost), then save engine, store and state. */
async function checkpoint(ctx: StepContext, step: number): Promise<void> {
  await ctx.pipeline.drain();
  const ck = ctx.dir.checkpointDir(step);
  await ctx.engine.trainer.saveState(join(ck, 'engine'));
  ctx.engine.writeCheckpointMeta?.(join(ck, 'engine'));
  ctx.state.pipeline = ctx.pipeline.snapshotState();
  ctx.replay.save(ck);
  saveRunState(ck, ctx.state, ctx.pipeline.store);
  ctx.pipeline.resume();
}

/**
 * Load the newest checkpoint that loads whole (engine state, run state, store); a broken one (a disk
 * that filled up, a file damaged after the fact) is reported and the one before it is tried.
 */
async function resumeNewestUsable(
  dir: RunDir,
  steps: number[],
  engine: Engine,
  storeOptions: RolloutStoreOptions,
  progress: Progress,
): Promise<{ state: LoopState; store: RolloutStore }> {
  const failures: string[] = [];
  for (const step of [...steps].reverse()) {
    const ck = dir.checkpointDir(step);
    try {
      await engine.trainer.loadState(join(ck, 'engine'));
      const loaded = loadRunState(ck, storeOptions);
      Replay.validate(ck);
      if (loaded.state.step !== step)
        throw new DataError(
          `${join(ck, 'state.json')}: holds step ${loaded.state.step}, the directory says ${step}`,
          join(ck, 'state.json'),
        );
      return loaded;
    } catch (error) {
      // a remote engine that cannot be reached is not a broken checkpoint: an older one would fail the same way
      if (error instanceof EngineCallError) throw error;
      const message = (error as Error)?.message ?? String(error);
      failures.push(`step-${step}: ${message}`);
      progress.line(`checkpoint ${ck} is unusable (${message}); trying the one before it`);
    }
  }
  throw new DataError(`${dir.path}: no checkpoint loads:\n  ${failures.join('\n  ')}`, dir.path);
}

function openRun(
  inputConfig: ArborConfig | undefined,
  options: TrainOptions,
): { config: ArborConfig; dir: RunDir; resumeSteps: number[] } {
  let config: ArborConfig;
  let dir: RunDir;
  let resumeSteps: number[] = [];
  if (options.resume) {
    dir = new RunDir(options.resume);
    config = parseConfig(YAML.parse(dir.readConfigText()), join(options.resume, 'config.resolved.yaml'));
    resumeSteps = dir.checkpoints();
    if (!resumeSteps.length)
      throw new ConfigError(`${options.resume}: no checkpoint to resume from (checkpoints/step-N/state.json)`);
  } else {
    if (!inputConfig) throw new ConfigError('train: a config is required');
    config = inputConfig;
    dir = new RunDir(config.run.outDir ?? join('runs', config.run.name));
    // a run that died before its first checkpoint left nothing to resume: its directory is reused
    const started =
      existsSync(dir.path) && (dir.checkpoints().length > 0 || existsSync(join(dir.path, 'summary.json')));
    const foreign =
      existsSync(dir.path) && readdirSync(dir.path).some((f) => !RUN_DIR_ENTRIES.has(f.replace(/\.tmp$/, '')));
    if ((started || foreign) && !options.force) {
      throw new ConfigError(
        `${dir.path} already exists; resume it with --resume ${dir.path}, pass --force, or set run.name/run.outDir`,
        'run.outDir',
      );
    }
  }
  if (options.steps !== undefined) config = { ...config, run: { ...config.run, steps: options.steps } };
  if (config.run.mode === 'sync' && config.run.maxStaleness > 0)
    throw new ConfigError(
      'run.maxStaleness > 0 needs run.mode: async (the synchronous loop trains on fresh rollouts only)',
      'run.maxStaleness',
    );
  if (!options.resume) dir.create(config);
  // the run directory as opened (a resumed one too): environments write their logs under it (agent-runtime.ts runLogDir)
  return { config: { ...config, run: { ...config.run, outDir: dir.path } }, dir, resumeSteps };
}

/** Async on the embedded engine: a worker thread with its own sampler; otherwise in-process. */
async function startHost(config: ArborConfig, engine: Engine): Promise<ProducerHost> {
  if (config.run.mode === 'async' && engine.embedded) return WorkerHost.start(config, engine.embedded.spec);
  return new InProcessHost(await Producer.create(config, engine.sampler, engine.tokenizer));
}

/** `wall_s` counts every session of a resumed run: the first one's setup, each one's step loop, the final evaluation. */
function summarize(
  config: ArborConfig,
  dir: RunDir,
  engine: Engine,
  state: LoopState,
  end: EvalResult,
  finalEvalSeconds: number,
): RunSummary {
  return {
    run_dir: dir.path,
    heldout_acc_start: state.evalStart.greedy,
    heldout_acc_end: end.greedyAccuracy,
    pass_at_k_start: state.evalStart.passAtK,
    pass_at_k_end: end.passAtK,
    heldout_sample_acc_start: state.evalStart.sample ?? null,
    heldout_sample_acc_end: end.sampleAccuracy,
    wall_s: (state.setupSeconds ?? 0) + state.wallSeconds + finalEvalSeconds,
    tokens_decoded: state.tokensDecoded,
    prefix_tokens_reused: state.prefixTokensReused,
    steps: state.step,
    generator: config.generate.kind,
    mode: config.run.mode,
    max_staleness: config.run.maxStaleness,
    warm_start: engine.origin,
  };
}

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

function pct(x: number | null): string {
  return x === null ? 'n/a' : `${(100 * x).toFixed(1)}%`;
}

/** Longest wait for one resource to close on a failed or interrupted run before the next is closed. */
const CLOSE_ON_FAILURE_MS = 10_000;

/**
 * What a run has opened (environments with their server processes, the engine, the rollout host),
 * closed in reverse order of opening. `add` returns the resource's own close, which runs once: the
 * normal path closes each where it is done with it; `closeAll` closes what is left on every path.
 */
class OpenResources {
  private readonly open: Array<() => Promise<void>> = [];

  add(close: () => Promise<unknown>): () => Promise<void> {
    let closing: Promise<void> | undefined;
    const once = (): Promise<void> => (closing ??= close().then(() => undefined));
    this.open.push(once);
    return once;
  }

  /**
   * Close everything not closed yet. After a failure each close is bounded (CLOSE_ON_FAILURE_MS) and
   * its error dropped, so the run's own error is the one reported; otherwise the first error is thrown.
   */
  async closeAll(failed: boolean): Promise<void> {
    const errors: unknown[] = [];
    for (const close of this.open.splice(0).reverse()) {
      if (!failed) {
        await close().catch((error: unknown) => void errors.push(error));
        continue;
      }
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_ON_FAILURE_MS)));
      await Promise.race([close().catch(() => undefined), bound]);
      clearTimeout(timer);
    }
    if (errors.length) throw errors[0];
  }
}

/** A promise that rejects when `signal` aborts (never, without one); `dispose` drops the listener. */
function interruption(signal: AbortSignal | undefined): { promise: Promise<never>; dispose: () => void } {
  if (!signal) return { promise: new Promise<never>(() => {}), dispose: () => {} };
  let onAbort = (): void => {};
  const promise = new Promise<never>((_, reject) => {
    onAbort = () => reject(new ArborError('train: interrupted; the environments and the engine were closed'));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  return { promise, dispose: () => signal.removeEventListener('abort', onAbort) };
}

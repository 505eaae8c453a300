/**
 * The one engine boundary: `buildEngine(spec)` returns the sampler, trainer and tokenizer of a run
 * (embedded nano transformer, or remote HTTP sampler + Tinker-compatible trainer), an optional frozen
 * reference policy for KL, an optional checkpoint writer, and for the embedded engine what a rollout
 * worker needs to run its own sampler copy. `run/` and `cli/` import no backend file but this one.
 * The embedded warm-start (SFT on demonstrations) is trained here when its cache directory is empty.
 */
import { existsSync, renameSync, rmSync } from 'node:fs';
import { fsyncDirectory } from '../core/files.js';
import { progressCounter, type ProgressTick } from '../core/progress-count.js';
import { dirname, join, resolve } from 'node:path';
import { ConfigError } from '../core/errors.js';
import type { EngineConfig, ModelConfig, SftConfig } from './config.js';
import { loadKernels } from './kernels/index.js';
import { isCheckpointDir, saveCheckpoint, writeCheckpointMeta } from './formats/checkpoint.js';
import type { NanoConfig } from './model/config.js';
import { NanoModel } from './model/model.js';
import { NanoSampler } from './embedded/sampler.js';
import { modelSize, runSft, type SftExample, type SftProgress } from './embedded/sft.js';
import { CharTokenizer, type TokenizerJSON } from './tokenizer/char.js';
import { NanoTrainer, type TrainerPacking } from './embedded/trainer.js';
import { kernelsOf, openModel, type KernelChoice } from './open.js';
import { buildRemoteSampler, buildRemoteTrainer, remoteMetrics } from './remote/build.js';
import type { Sampler, TextTokenizer, Trainer } from './types.js';
import { hfModelDir, hfStart, runAdapter, writeHfMeta } from './hf/engine.js';
import { LoraAdapter, type LoraSettings } from './model/lora.js';
import type { Kernels } from './kernels/types.js';
import type { HFTokenizer } from './tokenizer/hf.js';

export interface EngineSpec {
  engine: EngineConfig;
  model: ModelConfig;
  sft: SftConfig;
  /** The embedded trainer's batch layout (run config trainer.packing; default tree). */
  trainer?: { packing?: TrainerPacking };
}

export interface WarmStart {
  /** Where the warm-start checkpoint lives (trained there when missing). */
  dir: string;
  /** Demonstrations to train it on (called only when it must be trained, with the model's tokenizer). */
  examples: (tokenizer?: TextTokenizer) => SftExample[];
  seed: number;
  /** Hugging Face models: a prompt's tokens as the run encodes them (the chat template when engine.chatTemplate). */
  encodePrompt?: (tokenizer: TextTokenizer) => (prompt: string) => number[];
}

/** What a rollout worker needs to build its own embedded sampler (all structured-cloneable). */
export interface WorkerEngineSpec {
  /** A nano model (random weights until the first `setWeights`), or a Hugging Face directory loaded from disk. */
  model:
    | { kind: 'nano'; config: NanoConfig; tokenizer: TokenizerJSON }
    | { kind: 'hf'; dir: string; contextLength: number; lora?: LoraSettings };
  kernels: EngineConfig['kernels'];
  /** Kernel threads of the worker's sampler (engine.threads). */
  threads: number;
  pageSize: number;
}

export interface Engine {
  sampler: Sampler;
  trainer: Trainer;
  tokenizer: TextTokenizer;
  /** Frozen starting policy for the KL penalty (when requested and available). */
  reference?: Pick<Trainer, 'logprobs'>;
  /** Make a trainer state directory loadable as a model (arbor eval / serve). */
  writeCheckpointMeta?: (dir: string) => void;
  /** Embedded only: the worker spec and a copy of the current trained weights (the whole model's, or the adapter's). */
  embedded?: { spec: WorkerEngineSpec; weights: () => Float32Array };
  /** Remote engines: per-step counters for metrics.jsonl (sampler servers healthy, retries, resyncs; trainer retries). */
  stepMetrics?: () => Record<string, number>;
  /** Where the starting weights came from, and the model's size. */
  origin: string;
  description: string;
  close(): Promise<void>;
}

export interface BuildOptions {
  warmStart?: WarmStart;
  /** Build a frozen reference policy (KL penalty). */
  needReference?: boolean;
  /** Progress lines and transient updates (`milestone`: worth a line of its own where lines are not rewritten). */
  log?: (line: string) => void;
  update?: (line: string, milestone?: boolean) => void;
  /** Each step of a warm-start SFT trained now (not when a cached one is used): the run logs them to metrics.jsonl. */
  sftStep?: (p: SftProgress) => void;
}

/**
 * A warm-start SFT's progress: each step to `sftStep`, and a status line (step, loss, tokens/s, ETA) that
 * is a milestone every tenth of the steps, at the last and every 10 s, so output that is not rewritten
 * (CI, pipes) still shows the SFT advancing.
 */
function sftProgress(options: BuildOptions): (p: SftProgress) => void {
  const startedAt = Date.now();
  let tick: ProgressTick | undefined;
  return (p) => {
    const update = (text: string, milestone: boolean) => options.update?.(text, milestone);
    tick ??= progressCounter(update, 'warm-start: sft', p.steps, { startedAt });
    const heldOut = p.heldOutLoss !== undefined ? ` held-out ${p.heldOutLoss.toFixed(3)}` : '';
    tick(p.step, `loss ${p.loss.toFixed(3)}${heldOut} ${Math.round(p.tokensPerSecond)} tok/s`);
    options.sftStep?.(p);
  };
}

export async function buildEngine(spec: EngineSpec, options: BuildOptions = {}): Promise<Engine> {
  if (spec.engine.kind === 'remote') {
    if (options.needReference)
      throw new ConfigError(
        'optimize.loss.klCoef > 0 needs the embedded engine with a warm-start or model.checkpoint as the reference policy',
        'optimize.loss.klCoef',
      );
    const { sampler, tokenizer, origin } = buildRemoteSampler(spec.engine, options.log);
    const trainer = buildRemoteTrainer(spec.engine, sampler, options.log);
    const described = `${origin} + tinker ${spec.engine.trainer?.url}`;
    return {
      sampler,
      trainer,
      tokenizer,
      stepMetrics: remoteMetrics(sampler, trainer),
      origin: described,
      description: described,
      close: async () => sampler.close?.(),
    };
  }
  return buildEmbedded(spec, options);
}

async function buildEmbedded(spec: EngineSpec, options: BuildOptions): Promise<Engine> {
  const kernels = await loadKernels({ backend: spec.engine.kernels, threads: spec.engine.threads });
  const hfDir = hfModelDir(spec.model, options.update);
  if (hfDir) return buildHf(spec, hfDir, kernels, options);
  const startDir = await prepareStart(spec, options);
  if (options.needReference && !startDir)
    throw new ConfigError(
      'optimize.loss.klCoef > 0 needs the embedded engine with a warm-start or model.checkpoint as the reference policy',
      'optimize.loss.klCoef',
    );
  const { model, tokenizer } = startDir
    ? await openNano(startDir, kernels)
    : { model: await randomModel(spec.model, kernels), tokenizer: new CharTokenizer() };
  const sampler = new NanoSampler(model, { pageSize: spec.engine.pageSize });
  const packing = spec.trainer?.packing;
  const trainer = new NanoTrainer(model, { packing });
  const reference =
    options.needReference && startDir ? (await openModel(startDir, { kernels })).trainer({ packing }) : undefined;
  return {
    sampler,
    trainer,
    tokenizer,
    reference,
    writeCheckpointMeta: (dir) => writeCheckpointMeta(dir, model, tokenizer),
    embedded: {
      spec: {
        model: { kind: 'nano', config: model.config, tokenizer: tokenizer.toJSON() },
        kernels: spec.engine.kernels,
        threads: spec.engine.threads,
        pageSize: spec.engine.pageSize,
      },
      weights: () => model.params.data.slice(),
    },
    origin: startDir ?? 'random init',
    description: `model ${model.parameterCount} params from ${startDir ?? 'random init'}`,
    close: async () => {},
  };
}

/**
 * A Hugging Face model: its directory (or the SFT warm-start's), its tokenizer, and a LoRA adapter
 * when model.lora is set (the base is then frozen and shared by the sampler and the trainer).
 */
async function buildHf(spec: EngineSpec, hfDir: string, kernels: Kernels, options: BuildOptions): Promise<Engine> {
  const { model: m, sft } = spec;
  const warm = sft.enabled && options.warmStart && !m.checkpoint ? options.warmStart : undefined;
  const start = await hfStart(
    hfDir,
    m,
    kernels,
    warm && {
      dir: warm.dir,
      examples: warm.examples,
      seed: warm.seed,
      trains: sft.trains,
      encodePrompt:
        warm.encodePrompt ?? ((t) => (prompt) => [...(t.bos !== undefined ? [t.bos] : []), ...t.encode(prompt)]),
      sft: {
        steps: sft.steps,
        batchSize: sft.batchSize,
        learningRate: sft.learningRate,
        onProgress: sftProgress(options),
      },
    },
    options.log,
  );
  const opened = await openModel(start.baseDir, { kernels, contextLength: m.contextLength });
  const { model } = opened;
  const info = opened.info!;
  const tokenizer = opened.tokenizer as HFTokenizer;
  if (m.contextLength > info.maxPositionEmbeddings) {
    throw new ConfigError(
      `model.contextLength ${m.contextLength} exceeds ${join(start.baseDir, 'config.json')}'s max_position_embeddings (${info.maxPositionEmbeddings})`,
      'model.contextLength',
    );
  }
  const adapter = runAdapter(model, m.lora, start.adapterDir, m.initSeed, options.log);
  const sampler = new NanoSampler(model, { pageSize: spec.engine.pageSize, adapter });
  const baseModelName = resolve(start.baseDir);
  const packing = spec.trainer?.packing;
  const trainer = new NanoTrainer(model, { adapter, baseModelName, packing });
  const reference = options.needReference
    ? await hfReference(model, adapter, start.baseDir, kernels, m.contextLength, packing)
    : undefined;
  const what = adapter
    ? `rank-${adapter.rank} LoRA (${adapter.parameterCount} trained parameters${start.adapterDir ? ` from ${start.adapterDir}` : ''}) on `
    : '';
  return {
    sampler,
    trainer,
    tokenizer,
    reference,
    // a LoRA state directory is already a PEFT adapter naming its base; a full one gets config.json + tokenizer files
    writeCheckpointMeta: adapter ? undefined : (dir) => writeHfMeta(dir, info),
    embedded: {
      spec: {
        model: { kind: 'hf', dir: baseModelName, contextLength: model.config.contextLength, lora: adapter?.settings },
        kernels: spec.engine.kernels,
        threads: spec.engine.threads,
        pageSize: spec.engine.pageSize,
      },
      weights: () => (adapter ?? model).params.data.slice(),
    },
    origin: start.adapterDir ?? start.baseDir,
    description: `${what}${info.architecture} ${model.parameterCount} params from ${start.baseDir}`,
    close: async () => {},
  };
}

/** The KL reference policy: the starting adapter on the shared base, or a second copy of the model. */
async function hfReference(
  model: NanoModel,
  adapter: LoraAdapter | undefined,
  baseDir: string,
  kernels: Kernels,
  contextLength: number,
  packing: TrainerPacking | undefined,
): Promise<NanoTrainer> {
  if (!adapter) return (await openModel(baseDir, { kernels, contextLength })).trainer({ packing });
  const frozen = new LoraAdapter(model, adapter.settings);
  frozen.params.data.set(adapter.params.data);
  return new NanoTrainer(model, { adapter: frozen, packing });
}

function randomModel(m: ModelConfig, kernels: Awaited<ReturnType<typeof loadKernels>>): Promise<NanoModel> {
  const vocabSize = new CharTokenizer().vocabSize;
  return NanoModel.create(
    {
      vocabSize,
      dModel: m.dModel,
      nLayers: m.nLayers,
      nHeads: m.nHeads,
      dFF: m.dFF,
      contextLength: m.contextLength,
      tieEmbeddings: m.tieEmbeddings,
    },
    { seed: m.initSeed, kernels },
  );
}

/** A nano checkpoint opened with `kernels` (its model and char tokenizer). */
async function openNano(dir: string, kernels: Kernels): Promise<{ model: NanoModel; tokenizer: CharTokenizer }> {
  const opened = await openModel(dir, { kernels });
  return { model: opened.model, tokenizer: opened.tokenizer as CharTokenizer };
}

/** Load or train the starting checkpoint; returns its directory (undefined = random init). */
async function prepareStart(spec: EngineSpec, options: BuildOptions): Promise<string | undefined> {
  if (spec.model.checkpoint) return spec.model.checkpoint;
  if (!spec.sft.enabled || !options.warmStart) return undefined;
  const { dir, examples, seed } = options.warmStart;
  if (isCheckpointDir(dir)) {
    options.log?.(`warm-start: using ${dir}`);
    return dir;
  }
  if (existsSync(dir))
    options.log?.(`warm-start: ${dir} is incomplete (an interrupted earlier run?); training it again`);
  const kernels = await loadKernels({ backend: spec.engine.kernels, threads: spec.engine.threads });
  const model = await randomModel(spec.model, kernels);
  const tokenizer = new CharTokenizer();
  const data = examples(tokenizer);
  options.log?.(
    `warm-start: SFT on ${data.length} demonstrations, ${spec.sft.steps} steps, model of ${model.parameterCount} parameters`,
  );
  const result = await runSft(model, tokenizer, data, {
    steps: spec.sft.steps,
    batchSize: spec.sft.batchSize,
    learningRate: spec.sft.learningRate,
    seed,
    onProgress: sftProgress(options),
  });
  const finalLoss = result.trainLoss[result.trainLoss.length - 1];
  // trained into a private directory renamed into place whole: a kill leaves no half-written cache
  const partial = `${dir}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  try {
    saveCheckpoint(partial, model, tokenizer, { sft: { steps: spec.sft.steps, finalLoss } });
  } catch (error) {
    rmSync(partial, { recursive: true, force: true });
    throw error;
  }
  if (!isCheckpointDir(dir)) {
    rmSync(dir, { recursive: true, force: true });
    renameSync(partial, dir);
    fsyncDirectory(dirname(dir));
  } else {
    rmSync(partial, { recursive: true, force: true }); // another process finished the same warm-start first
  }
  const held = result.heldOut[result.heldOut.length - 1];
  options.log?.(
    `warm-start: done in ${(result.wallMs / 1000).toFixed(1)} s, train loss ${finalLoss.toFixed(3)}` +
      `${held ? `, held-out loss ${held.loss.toFixed(3)}` : ''} → ${dir}`,
  );
  return dir;
}

/** A worker's own embedded sampler over a copy of the weights; `setWeights` installs a published version. */
export async function buildWorkerSampler(
  spec: WorkerEngineSpec,
  options: { abortProbe?: () => boolean } = {},
): Promise<{
  sampler: Sampler;
  tokenizer: TextTokenizer;
  setWeights: (weights: Float32Array, version: number) => void;
}> {
  const kernels = await kernelsOf({ backend: spec.kernels, threads: spec.threads });
  let model: NanoModel;
  let tokenizer: TextTokenizer;
  let adapter: LoraAdapter | undefined;
  if (spec.model.kind === 'nano') {
    model = NanoModel.createSync(spec.model.config, kernels, 0);
    tokenizer = CharTokenizer.fromJSON(spec.model.tokenizer, 'worker tokenizer');
  } else {
    const opened = await openModel(spec.model.dir, { kernels, contextLength: spec.model.contextLength });
    ({ model } = opened);
    tokenizer = opened.tokenizer!;
    adapter = spec.model.lora ? new LoraAdapter(model, spec.model.lora) : undefined;
  }
  const sampler = new NanoSampler(model, { pageSize: spec.pageSize, abortProbe: options.abortProbe, adapter });
  const trained = (adapter ?? model).params.data;
  const setWeights = (weights: Float32Array, version: number) => {
    if (weights.length !== trained.length)
      throw new ConfigError(`worker: weights of ${weights.length} floats for ${trained.length} trained parameters`);
    trained.set(weights);
    model.weightVersion = version;
  };
  return { sampler, tokenizer, setWeights };
}

/**
 * Sampling only (`arbor eval`): a checkpoint — a nano checkpoint, a Hugging Face model directory, or a
 * PEFT adapter directory over its base (`base`, else the adapter's base_model_name_or_path) — or the
 * remote servers of an engine config.
 */
export async function buildSamplingEngine(
  source:
    { checkpoint: string; base?: string; contextLength?: number; kernels?: KernelChoice } | { engine: EngineConfig },
): Promise<{ sampler: Sampler; tokenizer: TextTokenizer; origin: string; contextLength?: number }> {
  if (!('checkpoint' in source)) return buildRemoteSampler(source.engine);
  const opened = await openModel(source.checkpoint, {
    base: source.base,
    contextLength: source.contextLength,
    kernels: source.kernels,
  });
  return {
    sampler: opened.sampler(),
    tokenizer: opened.tokenizer!,
    origin: opened.origin,
    contextLength: opened.model.config.contextLength,
  };
}

/** The embedded engine's own tokenizer (runs without a tokenizer.json of their own). */
export function defaultTokenizer(): TextTokenizer {
  return new CharTokenizer();
}

export interface SftFromScratch {
  examples: SftExample[];
  out: string;
  modelSize: string;
  contextLength: number;
  seed: number;
  steps: number;
  batchSize: number;
  learningRate: number;
  onProgress?: (p: SftProgress) => void;
}

/** `arbor sft`: a fresh nano model of a named size trained on prompt/completion pairs, saved as a checkpoint. */
export async function sftFromScratch(
  o: SftFromScratch,
): Promise<{ trainLoss: number; heldOutLoss?: number; wallMs: number }> {
  const tokenizer = new CharTokenizer();
  const model = await NanoModel.create(
    { ...modelSize(o.modelSize), vocabSize: tokenizer.vocabSize, contextLength: o.contextLength },
    { seed: o.seed },
  );
  const result = await runSft(model, tokenizer, o.examples, {
    steps: o.steps,
    batchSize: o.batchSize,
    learningRate: o.learningRate,
    seed: o.seed,
    onProgress: o.onProgress,
  });
  saveCheckpoint(o.out, model, tokenizer);
  return {
    trainLoss: result.trainLoss[result.trainLoss.length - 1],
    heldOutLoss: result.heldOut[result.heldOut.length - 1]?.loss,
    wallMs: result.wallMs,
  };
}

export { readSftJsonl, sftSequence, type SftExample, type SftProgress } from './embedded/sft.js';

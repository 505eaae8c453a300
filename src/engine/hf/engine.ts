/**
 * The embedded engine over a Hugging Face model: the model directory (created from `model.create` when
 * missing), its tokenizer (checked against the model's vocabulary), the optional LoRA adapter (new, or
 * a PEFT directory), and the SFT warm-start through the run's own prompt encoder (the chat template):
 * every weight (saved as a model directory) or the adapter (saved in PEFT format). Also what a checkpoint
 * directory needs to load again as a model (config.json and tokenizer files, or the adapter's base).
 */
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ConfigError } from '../../core/errors.js';
import { fsyncDirectory, writeFileAtomic } from '../../core/files.js';
import type { ProgressUpdate } from '../../core/progress-count.js';
import type { HfCreateConfig, LoraConfig, ModelConfig } from '../config.js';
import type { Kernels } from '../kernels/types.js';
import { LoraAdapter, type LoraModule, type LoraSettings } from '../model/lora.js';
import type { NanoModel } from '../model/model.js';
import { writeSafetensors } from '../formats/safetensors.js';
import { arenaTensors } from '../formats/checkpoint.js';
import { runSft, type SftExample, type SftOptions } from '../embedded/sft.js';
import { HFTokenizer } from '../tokenizer/hf.js';
import { isHfModelDir, type HfModelInfo } from '../formats/hf-config.js';
import { copyTokenizerFiles, creationProgress, makeHfModel } from './make.js';
import { loadHfModel } from './model.js';
import { isPeftAdapterDir, loadPeftAdapter, readPeftConfig, savePeftAdapter } from '../formats/peft.js';

/**
 * The HF model directory a run names (model.checkpoint holding an HF config.json, else model.hf), created
 * from model.create when missing (a large one reports its progress to `update`).
 */
export function hfModelDir(model: ModelConfig, update?: ProgressUpdate): string | undefined {
  if (model.checkpoint && isHfModelDir(model.checkpoint)) return model.checkpoint;
  if (!model.hf) {
    if (model.create)
      throw new ConfigError('model.create needs model.hf: the directory the model is created in', 'model.hf');
    return undefined;
  }
  if (!existsSync(join(model.hf, 'config.json'))) {
    if (!model.create)
      throw new ConfigError(
        `model.hf: ${model.hf} has no config.json (give model.create to make a random model there)`,
        'model.hf',
      );
    createModel(model.hf, model.create, update);
  }
  return model.hf;
}

/** Make the random model into a private directory renamed into place whole (a kill leaves nothing half-made). */
function createModel(dir: string, c: HfCreateConfig, update?: ProgressUpdate): void {
  const partial = `${dir}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  try {
    makeHfModel({
      out: partial,
      architecture: c.architecture,
      tokenizer: c.tokenizer,
      hiddenSize: c.hiddenSize,
      layers: c.layers,
      heads: c.heads,
      kvHeads: c.kvHeads,
      headDim: c.headDim,
      intermediateSize: c.intermediateSize,
      tieWordEmbeddings: c.tieWordEmbeddings,
      maxPositionEmbeddings: c.maxPositionEmbeddings,
      dtype: c.dtype,
      seed: c.seed,
      onProgress: update && creationProgress(update, 'model.create:'),
    });
  } catch (error) {
    rmSync(partial, { recursive: true, force: true });
    throw error;
  }
  mkdirSync(dirname(resolve(dir)), { recursive: true });
  if (!existsSync(join(dir, 'config.json'))) {
    rmSync(dir, { recursive: true, force: true });
    renameSync(partial, dir);
    fsyncDirectory(dirname(resolve(dir)));
  } else {
    rmSync(partial, { recursive: true, force: true }); // another process made it first
  }
}

export interface OpenedHfModel {
  model: NanoModel;
  info: HfModelInfo;
  tokenizer: HFTokenizer;
}

/** Load a model directory and its tokenizer (a tokenizer with ids beyond the model's vocabulary is refused). */
export async function openHfModel(
  dir: string,
  options: { kernels?: Kernels; contextLength?: number } = {},
): Promise<OpenedHfModel> {
  const { model, info } = await loadHfModel(dir, options);
  const tokenizer = HFTokenizer.fromDirectory(dir, { vocabSize: info.config.vocabSize });
  return { model, info, tokenizer };
}

export function loraSettings(c: LoraConfig): LoraSettings {
  return { rank: c.rank, alpha: c.alpha, targets: c.targets as LoraModule[], useRslora: c.useRslora };
}

/** The run's adapter: a PEFT directory when given, else a new one (PEFT init, seeded). */
export function runAdapter(
  model: NanoModel,
  lora: LoraConfig | undefined,
  adapterDir: string | undefined,
  seed: number,
  log?: (line: string) => void,
): LoraAdapter | undefined {
  if (adapterDir) {
    const adapter = loadPeftAdapter(adapterDir, model);
    if (lora && (adapter.rank !== lora.rank || adapter.settings.alpha !== lora.alpha)) {
      log?.(
        `warning: the adapter in ${adapterDir} has rank ${adapter.rank}, alpha ${adapter.settings.alpha}; ` +
          `model.lora says rank ${lora.rank}, alpha ${lora.alpha} (the adapter's are used)`,
      );
    }
    return adapter;
  }
  if (!lora) return undefined;
  const adapter = new LoraAdapter(model, loraSettings(lora));
  adapter.initialise(seed);
  return adapter;
}

/**
 * Write `model` as a Hugging Face model directory into `dir`: config.json (from the base's, dtype
 * float32), model.safetensors (F32, HF names) and the base directory's tokenizer files.
 */
export function saveHfModel(dir: string, model: NanoModel, info: HfModelInfo): void {
  mkdirSync(dir, { recursive: true });
  writeSafetensors(join(dir, 'model.safetensors'), arenaTensors(model.params), { format: 'pt' });
  writeHfMeta(dir, info);
}

/** config.json + tokenizer files beside a model.safetensors, so `dir` loads as a model directory. */
export function writeHfMeta(dir: string, info: HfModelInfo): void {
  mkdirSync(dir, { recursive: true });
  const { torch_dtype: _t, dtype: _d, ...raw } = info.raw;
  writeFileAtomic(join(dir, 'config.json'), JSON.stringify({ ...raw, torch_dtype: 'float32' }, null, 2) + '\n');
  copyTokenizerFiles(info.dir, dir);
}

export interface HfWarmStart {
  /** The warm-start directory (a model directory, or a PEFT adapter directory). */
  dir: string;
  examples: (tokenizer?: HFTokenizer) => SftExample[];
  seed: number;
  sft: Pick<SftOptions, 'steps' | 'batchSize' | 'learningRate' | 'onProgress'>;
  /** What it trains: every weight, or the adapter. */
  trains: 'model' | 'adapter';
  encodePrompt: (tokenizer: HFTokenizer) => (prompt: string) => number[];
}

/**
 * Where a run's weights start: the base model directory and, optionally, an adapter directory. With a
 * warm-start that is not there yet, it is trained first (SFT from `baseDir` through the run's prompt
 * encoder) and saved whole into place.
 */
export async function hfStart(
  baseDir: string,
  model: ModelConfig,
  kernels: Kernels,
  warm: HfWarmStart | undefined,
  log?: (line: string) => void,
): Promise<{ baseDir: string; adapterDir?: string }> {
  if (!warm) return { baseDir, adapterDir: model.lora?.adapter };
  if (warm.trains === 'adapter' && !model.lora)
    throw new ConfigError('sft.trains: adapter needs model.lora', 'sft.trains');
  const ready = warm.trains === 'model' ? isHfModelDir(warm.dir) : isPeftAdapterDir(warm.dir);
  if (ready) {
    log?.(`warm-start: using ${warm.dir}`);
    return warm.trains === 'model' ? { baseDir: warm.dir, adapterDir: undefined } : { baseDir, adapterDir: warm.dir };
  }
  if (existsSync(warm.dir))
    log?.(`warm-start: ${warm.dir} is incomplete (an interrupted earlier run?); training it again`);
  const { model: m, info, tokenizer } = await openHfModel(baseDir, { kernels, contextLength: model.contextLength });
  const adapter =
    warm.trains === 'adapter' ? runAdapter(m, model.lora, model.lora?.adapter, model.initSeed, log) : undefined;
  const data = warm.examples(tokenizer);
  log?.(
    'warm-start: SFT of ' +
      (adapter ? `a rank-${adapter.rank} LoRA adapter (${adapter.parameterCount} parameters) on` : 'every weight of') +
      ` ${baseDir} (${m.parameterCount} parameters) on ${data.length} demonstrations, ${warm.sft.steps} steps`,
  );
  const result = await runSft(m, tokenizer, data, {
    ...warm.sft,
    seed: warm.seed,
    encodePrompt: warm.encodePrompt(tokenizer),
    adapter,
    // the head only at the completion's positions: Hugging Face vocabularies make it most of the work
    weightedRowsOnly: true,
  });
  const partial = `${warm.dir}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  try {
    if (adapter) savePeftAdapter(partial, adapter, resolve(baseDir));
    else saveHfModel(partial, m, info);
  } catch (error) {
    rmSync(partial, { recursive: true, force: true });
    throw error;
  }
  rmSync(warm.dir, { recursive: true, force: true });
  mkdirSync(dirname(resolve(warm.dir)), { recursive: true });
  renameSync(partial, warm.dir);
  fsyncDirectory(dirname(resolve(warm.dir)));
  const held = result.heldOut[result.heldOut.length - 1];
  log?.(
    `warm-start: done in ${(result.wallMs / 1000).toFixed(1)} s, ` +
      `train loss ${result.trainLoss[result.trainLoss.length - 1].toFixed(3)}` +
      `${held ? `, held-out loss ${held.loss.toFixed(3)}` : ''} → ${warm.dir}`,
  );
  return adapter ? { baseDir, adapterDir: warm.dir } : { baseDir: warm.dir };
}

/** The base model directory of a PEFT adapter directory (its base_model_name_or_path, which must be a local model). */
export function adapterBase(adapterDir: string, override?: string): string {
  if (override) return override;
  const { baseModel } = readPeftConfig(adapterDir);
  if (!baseModel || !isHfModelDir(baseModel)) {
    throw new ConfigError(
      `${join(adapterDir, 'adapter_config.json')}: base_model_name_or_path ${JSON.stringify(baseModel)} ` +
        "is not a local model directory; give the base model's directory (--base)",
      'base_model_name_or_path',
    );
  }
  return baseModel;
}

/**
 * The one place a model is opened: a nano checkpoint (model.safetensors + config.json + the char
 * tokenizer), a Hugging Face model directory (config.json with `architectures`, its tokenizer), or a
 * PEFT adapter directory over its base (`base`, else the adapter's base_model_name_or_path), with the
 * kernel options (backend, threads) every path honours. The result holds the model, its tokenizer and
 * adapter, and makes samplers and trainers over them. `buildEngine`, the rollout worker, `arbor eval`
 * and `arbor serve` open models here. Code outside the engine (`arbor serve`, the CLI) reaches the
 * engine through this module: it also opens a served tokenizer again from its source, reads a
 * safetensors file, makes a random Hugging Face model directory (`arbor hf-init`), and (open-adapter.ts)
 * loads, trains and saves LoRA adapters over an opened model.
 */
import { readFile } from 'node:fs/promises';
import { loadKernels } from './kernels/index.js';
import type { Kernels } from './kernels/types.js';
import type { EngineConfig } from './config.js';
import { isHfModelDir, type HfModelInfo } from './formats/hf-config.js';
import { adapterBase } from './hf/engine.js';
import { loadHfModel } from './hf/model.js';
import { isPeftAdapterDir, loadPeftAdapter } from './formats/peft.js';
import { loadCheckpoint } from './formats/checkpoint.js';
import { decodeSafetensors, type Tensor } from './formats/safetensors.js';
import type { LoraAdapter } from './model/lora.js';
import type { NanoModel } from './model/model.js';
import { NanoSampler, type NanoSamplerOptions } from './embedded/sampler.js';
import { CharTokenizer, type TokenizerJSON } from './tokenizer/char.js';
import { NanoTrainer, type NanoTrainerOptions } from './embedded/trainer.js';
import { HFTokenizer } from './tokenizer/hf.js';
import { readGenerationDefaults, type GenerationDefaults } from './formats/generation-config.js';

// What `arbor serve` and the CLI use of the engine besides openModel: LoRA adapters over an opened
// model (open-adapter.ts), request batching, the random HF model maker, and the types they name.
export {
  adapterSampler,
  adapterTrainers,
  collectableView,
  ADAPTER_CONFIG,
  ADAPTER_WEIGHTS,
  isPeftAdapterDir,
  savePeftAdapter,
  type AdapterTrainers,
} from './open-adapter.js';
/** A sampler that gathers requests arriving together into one batch (the agent gateway). */
export { BatchingSampler, type GatherOptions } from './batch-sampler.js';
export { creationProgress, makeHfModel, type MakeHfOptions } from './hf/make.js';
export { HF_ARCHITECTURES, type HfArchitecture, type HfModelInfo } from './formats/hf-config.js';
export type { LoraAdapter, LoraModule, LoraSettings } from './model/lora.js';
export type { NanoModel } from './model/model.js';
export type { ParamArena } from './model/params.js';
export type { NanoSampler, NanoSamplerOptions } from './embedded/sampler.js';
export type { Tensor } from './formats/safetensors.js';
export type { CharTokenizer, TokenizerJSON } from './tokenizer/char.js';
export type { NanoTrainer, NanoTrainerOptions } from './embedded/trainer.js';
export type { HFTokenizer } from './tokenizer/hf.js';
export type { GenerationDefaults } from './formats/generation-config.js';

/** Which kernels run the model: an instance, or the engine config's backend and thread count. */
export type KernelChoice = Kernels | { backend?: EngineConfig['kernels']; threads?: number };

export interface OpenOptions {
  kernels?: KernelChoice;
  /** Cap the context below the model's (Hugging Face models; vLLM --max-model-len). */
  contextLength?: number;
  /** A PEFT adapter's base model directory (default: the adapter's base_model_name_or_path). */
  base?: string;
  /** Hugging Face models: open without the tokenizer (token ids in and out; vLLM --skip-tokenizer-init). */
  skipTokenizer?: boolean;
}

export interface OpenedModel {
  kind: 'nano' | 'hf';
  /** The directory opened, and the model's own (the base of an adapter). */
  dir: string;
  baseDir: string;
  model: NanoModel;
  /** The model's tokenizer (undefined only with skipTokenizer). */
  tokenizer?: CharTokenizer | HFTokenizer;
  /** The adapter of a PEFT directory. */
  adapter?: LoraAdapter;
  /** Hugging Face models: architecture, config, end ids. */
  info?: HfModelInfo;
  /** Hugging Face models opened with their tokenizer: generation_config.json's sampling defaults. */
  generation?: GenerationDefaults;
  /** What was opened, for logs: the directory and the model's shape. */
  origin: string;
  /** A sampler over the model (and the opened adapter unless another is given). */
  sampler(options?: NanoSamplerOptions): NanoSampler;
  /** A trainer over the model (options as NanoTrainer's). */
  trainer(options?: NanoTrainerOptions): NanoTrainer;
}

/** The kernels of a choice (loaded with the backend and thread count it names). */
export async function kernelsOf(choice: KernelChoice | undefined): Promise<Kernels> {
  if (choice && 'matmul' in choice) return choice;
  return loadKernels({ backend: choice?.backend, threads: choice?.threads });
}

/** Open the model in `dir` (nano checkpoint, Hugging Face directory, or PEFT adapter over its base). */
export async function openModel(dir: string, options: OpenOptions = {}): Promise<OpenedModel> {
  const kernels = await kernelsOf(options.kernels);
  const made = (o: Omit<OpenedModel, 'sampler' | 'trainer'>): OpenedModel => ({
    ...o,
    sampler: (s = {}) => new NanoSampler(o.model, { adapter: o.adapter, ...s }),
    trainer: (t = {}) => new NanoTrainer(o.model, t),
  });
  const adapterDir = isPeftAdapterDir(dir) ? dir : undefined;
  if (adapterDir || isHfModelDir(dir)) {
    const baseDir = adapterDir ? adapterBase(adapterDir, options.base) : dir;
    const { model, info } = await loadHfModel(baseDir, { kernels, contextLength: options.contextLength });
    const tokenizer = options.skipTokenizer
      ? undefined
      : HFTokenizer.fromDirectory(baseDir, { vocabSize: info.config.vocabSize });
    const adapter = adapterDir ? loadPeftAdapter(adapterDir, model) : undefined;
    const origin = adapterDir ? `${adapterDir} (LoRA on ${baseDir})` : `${dir} (${info.architecture})`;
    const generation = tokenizer ? readGenerationDefaults(baseDir) : undefined;
    return made({ kind: 'hf', dir, baseDir, model, tokenizer, adapter, info, generation, origin });
  }
  // loading refuses NaN or infinite weights, naming the tensors (formats/checkpoint.ts)
  const { model, tokenizer } = await loadCheckpoint(dir, { kernels });
  return made({ kind: 'nano', dir, baseDir: dir, model, tokenizer, origin: dir });
}

/** How to open a tokenizer again: a Hugging Face model directory's files, or the char tokenizer's JSON. */
export type TokenizerSource = { kind: 'hf'; dir: string } | { kind: 'char'; json: TokenizerJSON };

/** The tokenizer a source describes, built again from its files or data. */
export function openTokenizer(source: { kind: 'hf'; dir: string }): HFTokenizer;
export function openTokenizer(source: { kind: 'char'; json: TokenizerJSON }): CharTokenizer;
export function openTokenizer(source: TokenizerSource): HFTokenizer | CharTokenizer {
  if (source.kind === 'hf') return HFTokenizer.fromDirectory(source.dir);
  return CharTokenizer.fromJSON(source.json, 'the served char tokenizer');
}

/** The tensors of a safetensors file (errors name the file as `shown`, and the tensor). */
export async function readSafetensorsFile(file: string, shown: string): Promise<Record<string, Tensor>> {
  return decodeSafetensors(await readFile(file), shown).tensors;
}

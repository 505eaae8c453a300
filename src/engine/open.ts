/**
 * The one place a model is opened: a nano checkpoint (model.safetensors + config.json + the char
 * tokenizer), a Hugging Face model directory (config.json with `architectures`, its tokenizer), or a
 * PEFT adapter directory over its base (`base`, else the adapter's base_model_name_or_path), with the
 * kernel options (backend, threads) every path honours. The result holds the model, its tokenizer and
 * adapter, and makes samplers and trainers over them. `buildEngine`, the rollout worker, `arbor eval`
 * and `arbor serve` open models here.
 */
import { loadKernels } from './kernels/index.js';
import type { Kernels } from './kernels/types.js';
import type { EngineConfig } from './config.js';
import { isHfModelDir, type HfModelInfo } from './hf/config.js';
import { adapterBase } from './hf/engine.js';
import { loadHfModel } from './hf/model.js';
import { isPeftAdapterDir, loadPeftAdapter } from './hf/peft.js';
import { loadCheckpoint } from './nano/checkpoint.js';
import type { LoraAdapter } from './nano/lora.js';
import type { NanoModel } from './nano/model.js';
import { NanoSampler, type NanoSamplerOptions } from './nano/sampler.js';
import type { CharTokenizer } from './nano/tokenizer.js';
import { NanoTrainer, type NanoTrainerOptions } from './nano/trainer.js';
import { HFTokenizer } from './tokenizer/hf.js';

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
    return made({ kind: 'hf', dir, baseDir, model, tokenizer, adapter, info, origin });
  }
  // loading refuses NaN or infinite weights, naming the tensors (nano/checkpoint.ts)
  const { model, tokenizer } = await loadCheckpoint(dir, { kernels });
  return made({ kind: 'nano', dir, baseDir: dir, model, tokenizer, origin: dir });
}

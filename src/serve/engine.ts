/**
 * What `arbor serve --checkpoint DIR` serves, assembled once: a nano checkpoint (its char tokenizer,
 * full fine-tuning over Tinker, /update_weights_from_disk) or a Hugging Face model directory (config.json
 * with `architectures`: loadHfModel, HFTokenizer with its chat template, generation_config.json's end
 * ids and sampling defaults, Tinker LoRA training per create_model, vLLM LoRA serving with
 * --enable-lora). Options mirror vLLM's flags (--max-model-len, --skip-tokenizer-init, --enable-lora,
 * --lora-modules, --max-lora-rank, --max-loras). The result is the ServeOptions of an ArborServer.
 */
import { dirname, resolve } from 'node:path';
import { ConfigError } from '../core/errors.js';
import {
  adapterSampler,
  adapterTrainers,
  openModel,
  type CharTokenizer,
  type HFTokenizer,
  type NanoModel,
  type OpenedModel,
} from '../engine/open.js';
import { LoraRegistry, type LoraModulePath } from './vllm/lora.js';
import type { ServeOptions } from './server.js';
import { charServeTokenizer, hfServeTokenizer } from './tokenizers.js';
import type { TinkerModels } from './tinker/service.js';
import { nanoWeightLoader } from './weights.js';

export { charServeTokenizer, hfServeTokenizer } from './tokenizers.js';

export interface ServeEngineOptions {
  /** A nano checkpoint or a Hugging Face model directory. */
  checkpoint: string;
  /** The served model name (default: arbor-nano for nano, the directory as given for HF, as vLLM). */
  name?: string;
  /** Cap the context below the model's (vLLM --max-model-len). */
  maxModelLen?: number;
  /** Kernel threads (engine.threads). */
  threads?: number;
  /** Serve without a tokenizer: token ids in and out (vLLM --skip-tokenizer-init). */
  skipTokenizerInit?: boolean;
  /** Runtime LoRA adapters: /v1/load_lora_adapter, /v1/unload_lora_adapter (vLLM --enable-lora). */
  enableLora?: boolean;
  /** Adapters registered at start (vLLM --lora-modules); implies enableLora. */
  loraModules?: LoraModulePath[];
  /** Largest adapter rank served or trained (vLLM --max-lora-rank, default 16). */
  maxLoraRank?: number;
  /** Adapters held in memory at once (vLLM --max-loras, default 1). */
  maxLoras?: number;
  /** Where Tinker save_weights and sampler weights are kept. */
  stateDir?: string;
  /** Directories /update_weights_from_disk may load from (nano; default the checkpoint's parent). */
  weightsRoots?: string[];
  pageSize?: number;
}

/** The assembled engine: the ServeOptions for ArborServer, and a line describing it. */
export interface ServeEngine {
  options: ServeOptions;
  model: NanoModel;
  kind: 'nano' | 'hf';
  description: string;
  /** Settings of generation_config.json the sampler cannot apply (ignored; the CLI warns). */
  ignoredDefaults: string[];
}

export async function loadServeEngine(o: ServeEngineOptions): Promise<ServeEngine> {
  if (o.maxModelLen !== undefined && !(Number.isInteger(o.maxModelLen) && o.maxModelLen >= 2)) {
    throw new ConfigError(`--max-model-len must be an integer ≥ 2, got ${o.maxModelLen}`, 'max-model-len');
  }
  const opened = await openModel(o.checkpoint, {
    kernels: { threads: o.threads },
    contextLength: o.maxModelLen,
    skipTokenizer: o.skipTokenizerInit,
  });
  if (opened.adapter)
    throw new ConfigError(
      `${o.checkpoint} is a PEFT adapter: serve its base model and the adapter with --enable-lora --lora-modules NAME=${o.checkpoint}`,
      'checkpoint',
    );
  return opened.kind === 'hf' ? loadHf(o, opened) : loadNano(o, opened);
}

function loadNano(o: ServeEngineOptions, opened: OpenedModel): ServeEngine {
  const { model } = opened;
  const tokenizer = opened.tokenizer as CharTokenizer;
  const name = o.name ?? 'arbor-nano';
  const options: ServeOptions = {
    sampler: opened.sampler({ pageSize: o.pageSize }),
    trainer: opened.trainer(),
    modelName: name,
    modelRoot: o.checkpoint,
    tokenizer: o.skipTokenizerInit ? undefined : charServeTokenizer(tokenizer),
    skipTokenizerInit: o.skipTokenizerInit,
    eosTokenIds: [tokenizer.eos],
    stateDir: o.stateDir,
    prepareWeights: nanoWeightLoader(model),
    weightsRoots: o.weightsRoots ?? [dirname(resolve(o.checkpoint))],
    limits: o.maxModelLen ? { contextLength: Math.min(o.maxModelLen, model.config.contextLength) } : undefined,
    lora: loraRegistry(o, model, name),
  };
  const description = `${o.checkpoint} (nano, ${model.parameterCount} parameters)`;
  return { options, model, kind: 'nano', description, ignoredDefaults: [] };
}

function loadHf(o: ServeEngineOptions, opened: OpenedModel): ServeEngine {
  const { model } = opened;
  const info = opened.info!;
  const tokenizer = opened.tokenizer as HFTokenizer | undefined;
  const name = o.name ?? o.checkpoint;
  const generation = opened.generation ?? {};
  // the end ids: the tokenizer's (generation_config ∪ eos_token); without a tokenizer, config.json's
  const eosIds = tokenizer ? [...tokenizer.eosIds] : info.eosTokenIds;
  const { minP, repetitionPenalty, temperature, topP, topK, maxNewTokens } = generation;
  const ignoredDefaults = [
    minP !== undefined && minP !== 0 ? `min_p ${minP}` : '',
    repetitionPenalty !== undefined && repetitionPenalty !== 1 ? `repetition_penalty ${repetitionPenalty}` : '',
  ].filter(Boolean);
  const tinkerModels = hfTinkerModels(model, resolve(o.checkpoint), o);
  const options: ServeOptions = {
    sampler: opened.sampler({ pageSize: o.pageSize }),
    tinkerModels,
    modelName: name,
    modelRoot: o.checkpoint,
    tokenizer: tokenizer && hfServeTokenizer(tokenizer),
    skipTokenizerInit: o.skipTokenizerInit,
    eosTokenIds: eosIds,
    generationDefaults: { temperature, topP, topK, maxNewTokens },
    stateDir: o.stateDir,
    lora: loraRegistry(o, model, name),
  };
  const shape = `${info.architecture}, ${model.parameterCount} parameters, context ${model.config.contextLength}`;
  const description = `${o.checkpoint} (${shape})`;
  return { options, model, kind: 'hf', description, ignoredDefaults };
}

/** The vLLM LoRA registry with `--lora-modules` loaded (refusing to start on a bad one), or none. */
function loraRegistry(o: ServeEngineOptions, model: NanoModel, baseName: string): LoraRegistry | undefined {
  if (!o.enableLora && !o.loraModules?.length) return undefined;
  const limits = { maxLoras: o.maxLoras ?? 1, maxLoraRank: o.maxLoraRank ?? 16 };
  const registry = new LoraRegistry(model, { baseName, ...limits, pageSize: o.pageSize });
  for (const m of o.loraModules ?? []) {
    try {
      registry.load(m.name, m.path, { baseModelName: m.baseModelName });
    } catch (error) {
      const message = `--lora-modules ${m.name}=${m.path}: ${(error as Error).message}`;
      throw new ConfigError(message, 'lora-modules', undefined, { cause: error });
    }
  }
  return registry;
}

/**
 * Tinker training of an HF model: LoRA adapters (PEFT init) over the frozen base, or the whole model.
 * Trainers live in the kernels' arena (never freed), so one is made per LoRA shape and reused, reset,
 * by a later create_model of that shape (engine/open-adapter.ts).
 */
function hfTinkerModels(model: NanoModel, baseModel: string, o: ServeEngineOptions): TinkerModels {
  const trainers = adapterTrainers(model, baseModel);
  return {
    baseModel,
    maxRank: Math.max(o.maxLoraRank ?? 64, 64),
    loraTrainer: (settings, seed) => trainers.lora(settings, seed),
    fullTrainer: () => trainers.full(),
    adapterSampler: (dir) => adapterSampler(model, dir, { pageSize: o.pageSize }),
  };
}

/**
 * A small random Hugging Face model directory of a given architecture, for tests, benchmarks and
 * examples (real weights cannot be downloaded here): config.json in the Hub's shape (or transformers
 * 5's), model.safetensors (or shards + model.safetensors.index.json) with HF names and N(0, std)
 * weights in F32/F16/BF16, generated and written tensor by tensor, and the tokenizer files of a given
 * tokenizer directory (tokenizer.json, tokenizer_config.json, chat template, generation_config.json).
 * The result loads in transformers as it loads here (`loadHfModel`). A large shape takes seconds to
 * minutes (the weights are drawn one by one): `creationProgress` reports the parameters drawn, with an ETA.
 */
import { cpSync, copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError } from '../../core/errors.js';
import { writeFileAtomic } from '../../core/files.js';
import { progressCounter, type ProgressTick, type ProgressUpdate } from '../../core/progress-count.js';
import { Rng } from '../../core/rng.js';
import { paramSpecs, type ParamSpec } from '../model/config.js';
import { writeSafetensorsFrom, type FloatDtype } from '../formats/safetensors.js';
import { parseHfConfig, type HfArchitecture } from '../formats/hf-config.js';
import { HFTokenizer } from '../tokenizer/hf.js';

export interface MakeHfOptions {
  /** Output directory (created). */
  out: string;
  architecture: HfArchitecture;
  hiddenSize: number;
  layers: number;
  heads: number;
  /** Default: heads. */
  kvHeads?: number;
  /** Default: Qwen3 128, else hiddenSize/heads. */
  headDim?: number;
  intermediateSize: number;
  /** Default: the tokenizer's largest id + 1 rounded up to a multiple of 64 (required without a tokenizer). */
  vocabSize?: number;
  tieWordEmbeddings?: boolean;
  ropeTheta?: number;
  /** The Hub's rope_scaling object (e.g. Llama 3.1's llama3 rule), written as given. */
  ropeScaling?: Record<string, unknown> | null;
  maxPositionEmbeddings?: number;
  rmsNormEps?: number;
  /** Directory with tokenizer.json (+ tokenizer_config.json, chat_template.jinja, generation_config.json) to copy. */
  tokenizer?: string;
  dtype?: FloatDtype;
  seed?: number;
  /** Standard deviation of the weights (transformers' initializer_range is 0.02). */
  initStd?: number;
  /** Split the weights into shards of at most this many bytes (with model.safetensors.index.json). */
  shardBytes?: number;
  /** Called as the weights are generated: parameters done so far, of `total` (every hundredth, or million). */
  onProgress?: (done: number, total: number) => void;
}

/** Models of at least this many parameters report their creation (`creationProgress`): 100 MB of F32. */
export const PROGRESS_PARAMETERS = 25_000_000;

/**
 * `onProgress` for makeHfModel: "<label> <done>M/<total>M parameters eta <time>" through `update` (a
 * milestone every tenth and every 10 s), for models of at least `threshold` parameters; smaller ones
 * are made in a moment and say nothing.
 */
export function creationProgress(
  update: ProgressUpdate,
  label: string,
  threshold = PROGRESS_PARAMETERS,
): (done: number, total: number) => void {
  const startedAt = Date.now();
  let tick: ProgressTick | undefined;
  const millions = (n: number) => `${(n / 1e6).toFixed(1)}M`;
  return (done, total) => {
    if (total < threshold) return;
    tick ??= progressCounter(update, label, total, { startedAt, unit: millions });
    tick(done, 'parameters');
  };
}

const MODEL_TYPE: Record<HfArchitecture, string> = {
  LlamaForCausalLM: 'llama',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
};
const TOKENIZER_FILES = [
  'tokenizer.json',
  'tokenizer_config.json',
  'chat_template.jinja',
  'special_tokens_map.json',
  'generation_config.json',
];

/** Copy a model directory's tokenizer files (and named chat templates, generation config) from `from` into `to`. */
export function copyTokenizerFiles(from: string, to: string): void {
  if (resolve(from) === resolve(to)) return;
  for (const f of TOKENIZER_FILES) if (existsSync(join(from, f))) copyFileSync(join(from, f), join(to, f));
  const named = join(from, 'additional_chat_templates');
  if (existsSync(named)) cpSync(named, join(to, 'additional_chat_templates'), { recursive: true });
}
const DTYPE_NAME: Record<FloatDtype, string> = { F32: 'float32', F16: 'float16', BF16: 'bfloat16' };

/** The config.json of the options, in the Hub's usual shape. */
export function hfConfigJson(
  o: MakeHfOptions,
  vocabSize: number,
  ids: { bos?: number; eos?: number },
): Record<string, unknown> {
  const qwen = o.architecture !== 'LlamaForCausalLM';
  return {
    architectures: [o.architecture],
    model_type: MODEL_TYPE[o.architecture],
    vocab_size: vocabSize,
    hidden_size: o.hiddenSize,
    intermediate_size: o.intermediateSize,
    num_hidden_layers: o.layers,
    num_attention_heads: o.heads,
    num_key_value_heads: o.kvHeads ?? o.heads,
    ...(o.headDim !== undefined || o.architecture === 'Qwen3ForCausalLM' ? { head_dim: o.headDim ?? 128 } : {}),
    max_position_embeddings: o.maxPositionEmbeddings ?? 2048,
    rope_theta: o.ropeTheta ?? (qwen ? 1_000_000 : 10_000),
    rope_scaling: o.ropeScaling ?? null,
    rms_norm_eps: o.rmsNormEps ?? 1e-6,
    tie_word_embeddings: o.tieWordEmbeddings ?? true,
    hidden_act: 'silu',
    attention_bias: false,
    attention_dropout: 0.0,
    ...(o.architecture === 'LlamaForCausalLM'
      ? { mlp_bias: false }
      : { use_sliding_window: false, sliding_window: null, max_window_layers: o.layers }),
    ...(ids.bos !== undefined ? { bos_token_id: ids.bos } : {}),
    ...(ids.eos !== undefined ? { eos_token_id: ids.eos } : {}),
    initializer_range: o.initStd ?? 0.02,
    torch_dtype: DTYPE_NAME[o.dtype ?? 'F32'],
    use_cache: true,
  };
}

/** Write the model directory; returns its parameter count. */
export function makeHfModel(o: MakeHfOptions): { dir: string; parameterCount: number; vocabSize: number } {
  if (o.tokenizer && !existsSync(join(o.tokenizer, 'tokenizer.json')))
    throw new ConfigError(`tokenizer directory ${o.tokenizer} has no tokenizer.json`, 'tokenizer');
  const tokenizer = o.tokenizer ? HFTokenizer.fromDirectory(o.tokenizer) : undefined;
  const vocabSize = o.vocabSize ?? (tokenizer ? Math.ceil(tokenizer.vocabSize / 64) * 64 : undefined);
  if (vocabSize === undefined) throw new ConfigError('vocabSize is required without a tokenizer', 'vocabSize');
  const ids = tokenizer
    ? { bos: tokenizer.specialTokens[String(tokenizer.specialTokensMap.bos_token)], eos: tokenizer.eos }
    : {};
  const configJson = hfConfigJson(o, vocabSize, ids);
  const configFile = join(o.out, 'config.json');
  const { config } = parseHfConfig(configJson, configFile, o.out); // the same checks a load makes
  mkdirSync(o.out, { recursive: true });
  const specs = paramSpecs(config);
  const rng = new Rng(o.seed ?? 0);
  const std = o.initStd ?? 0.02;
  const total = specs.reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
  // reported every hundredth of the parameters (at most every million): a tenth is never skipped by far
  const every = Math.max(1, Math.min(1 << 20, Math.floor(total / 100)));
  let done = 0;
  const fill = (name: string, out: Float32Array) => {
    const spec = specs.find((s) => s.name === name)!;
    if (spec.init === 'ones') out.fill(1);
    else if (spec.init === 'zeros') out.fill(0);
    else
      for (let i0 = 0; i0 < out.length; i0 += every) {
        const end = Math.min(out.length, i0 + every);
        for (let i = i0; i < end; i++) out[i] = rng.normal() * std;
        if (end < out.length) o.onProgress?.(done + end, total);
      }
    done += out.length;
    o.onProgress?.(done, total);
  };
  const dtype = o.dtype ?? 'F32';
  writeShards(o.out, shardList(specs, dtype, o.shardBytes), fill, dtype);
  writeFileAtomic(configFile, JSON.stringify(configJson, null, 2) + '\n');
  if (o.tokenizer) {
    copyTokenizerFiles(o.tokenizer, o.out);
  }
  if (!existsSync(join(o.out, 'generation_config.json'))) {
    writeFileAtomic(
      join(o.out, 'generation_config.json'),
      JSON.stringify(
        {
          ...(ids.bos !== undefined ? { bos_token_id: ids.bos } : {}),
          ...(ids.eos !== undefined ? { eos_token_id: ids.eos } : {}),
        },
        null,
        2,
      ) + '\n',
    );
  }
  return { dir: o.out, parameterCount: total, vocabSize };
}

/** Tensors grouped into shards of at most `shardBytes` (one shard without a limit). */
function shardList(specs: ParamSpec[], dtype: FloatDtype, shardBytes?: number): ParamSpec[][] {
  if (!shardBytes) return [specs];
  const bytes = (s: ParamSpec) => s.shape.reduce((a, b) => a * b, 1) * (dtype === 'F32' ? 4 : 2);
  const shards: ParamSpec[][] = [[]];
  let size = 0;
  for (const s of specs) {
    if (size > 0 && size + bytes(s) > shardBytes) {
      shards.push([]);
      size = 0;
    }
    shards[shards.length - 1].push(s);
    size += bytes(s);
  }
  return shards;
}

function writeShards(
  dir: string,
  shards: ParamSpec[][],
  fill: (name: string, out: Float32Array) => void,
  dtype: FloatDtype,
): void {
  const meta = { format: 'pt' };
  if (shards.length === 1) {
    writeSafetensorsFrom(join(dir, 'model.safetensors'), shards[0], fill, dtype, meta);
    return;
  }
  const weightMap: Record<string, string> = {};
  let total = 0;
  shards.forEach((shard, i) => {
    const name = `model-${String(i + 1).padStart(5, '0')}-of-${String(shards.length).padStart(5, '0')}.safetensors`;
    writeSafetensorsFrom(join(dir, name), shard, fill, dtype, meta);
    for (const s of shard) {
      weightMap[s.name] = name;
      total += s.shape.reduce((a, b) => a * b, 1) * (dtype === 'F32' ? 4 : 2);
    }
  });
  writeFileAtomic(
    join(dir, 'model.safetensors.index.json'),
    JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2) + '\n',
  );
}

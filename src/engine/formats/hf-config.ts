/**
 * A Hugging Face `config.json` → the embedded model's description (NanoConfig with HF names), for
 * LlamaForCausalLM (SmolLM2, TinyLlama, Llama 3.x with llama3 rope scaling), Qwen2ForCausalLM (q/k/v
 * bias) and Qwen3ForCausalLM (q/k RMSNorm, explicit head_dim). Both shapes of the file are read: the
 * Hub's (`rope_theta`, `rope_scaling`) and transformers 5's (`rope_parameters`, `layer_types`). Defaults
 * follow transformers' configuration classes (e.g. Qwen3's head_dim is 128 when
 * absent). Whatever this engine does not compute (another architecture, sliding-window layers, experts,
 * an unknown rope type, another activation, quantised weights) is refused at load, naming the field.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../../core/errors.js';
import { readJsonObject } from '../../core/files.js';
import type { NanoConfig, RopeScaling } from '../model/config.js';

export const HF_ARCHITECTURES = ['LlamaForCausalLM', 'Qwen2ForCausalLM', 'Qwen3ForCausalLM'] as const;
export type HfArchitecture = (typeof HF_ARCHITECTURES)[number];

const MODEL_TYPES: Record<string, HfArchitecture> = {
  llama: 'LlamaForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
};

export interface HfModelInfo {
  /** The model directory. */
  dir: string;
  architecture: HfArchitecture;
  /** The embedded model's description (HF parameter names, transformers' rotary tables). */
  config: NanoConfig;
  /** config.json as read (exports write it back). */
  raw: Record<string, unknown>;
  /** max_position_embeddings of the checkpoint (the context may be capped below it). */
  maxPositionEmbeddings: number;
  /** config.json's bos/eos token ids, when set. */
  bosTokenId?: number;
  eosTokenIds: number[];
}

/** Whether `dir` holds a Hugging Face causal-LM config.json (one with `architectures` or `model_type`). */
export function isHfModelDir(dir: string): boolean {
  const file = join(dir, 'config.json');
  if (!existsSync(file)) return false;
  try {
    const raw = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    return Array.isArray(raw.architectures) || typeof raw.model_type === 'string';
  } catch {
    return false;
  }
}

/** Read and check `dir/config.json`; `contextLength` caps the context (rotary tables, KV cache) below the checkpoint's. */
export function readHfConfig(dir: string, options: { contextLength?: number } = {}): HfModelInfo {
  const file = join(dir, 'config.json');
  return parseHfConfig(readJsonObject(file), file, dir, options);
}

/** The checks and defaults of readHfConfig over an already-parsed config (`file` names it in errors). */
export function parseHfConfig(
  raw: Record<string, unknown>,
  file: string,
  dir: string,
  options: { contextLength?: number } = {},
): HfModelInfo {
  const refuse = (field: string, why: string) => new ConfigError(`${file}: ${field}: ${why}`, field, file);
  const architecture = architectureOf(raw, refuse);
  const num = (key: string, fallback?: number): number => {
    const v = raw[key];
    if (v === undefined || v === null) {
      if (fallback !== undefined) return fallback;
      throw refuse(key, 'required');
    }
    if (typeof v !== 'number' || !Number.isFinite(v)) throw refuse(key, `must be a number, got ${JSON.stringify(v)}`);
    return v;
  };
  const int = (key: string, fallback?: number): number => {
    const v = num(key, fallback);
    if (!Number.isInteger(v) || v <= 0) throw refuse(key, `must be a positive integer, got ${v}`);
    return v;
  };
  const flag = (key: string, fallback: boolean): boolean => {
    const v = raw[key];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'boolean') throw refuse(key, `must be true or false, got ${JSON.stringify(v)}`);
    return v;
  };
  refuseUnsupported(raw, architecture, refuse);
  const hidden = int('hidden_size');
  const heads = int('num_attention_heads');
  const kvHeads = int('num_key_value_heads', heads);
  if (heads % kvHeads !== 0)
    throw refuse('num_key_value_heads', `${kvHeads} must divide num_attention_heads (${heads})`);
  // head_dim: Llama None → hidden/heads; Qwen2 has none; Qwen3 defaults to 128 (configuration_qwen3.py)
  const headDim = int('head_dim', architecture === 'Qwen3ForCausalLM' ? 128 : hidden / heads);
  if (headDim % 2 !== 0) throw refuse('head_dim', `${headDim} must be even for rotary positions`);
  const maxPositionEmbeddings = int('max_position_embeddings', architecture === 'LlamaForCausalLM' ? 2048 : 32768);
  const cap = options.contextLength;
  const contextLength = cap !== undefined ? Math.min(cap, maxPositionEmbeddings) : maxPositionEmbeddings;
  const { theta, scaling } = ropeOf(raw, maxPositionEmbeddings, refuse);
  const attentionBias = flag('attention_bias', false);
  const config: NanoConfig = {
    vocabSize: int('vocab_size'),
    dModel: hidden,
    nLayers: int('num_hidden_layers'),
    nHeads: heads,
    nKVHeads: kvHeads,
    headDim,
    dFF: int('intermediate_size'),
    contextLength,
    tieEmbeddings: flag('tie_word_embeddings', false),
    ropeTheta: theta,
    normEps: num('rms_norm_eps', 1e-6),
    bias:
      architecture === 'Qwen2ForCausalLM'
        ? { qkv: true, o: false, mlp: false }
        : { qkv: attentionBias, o: attentionBias, mlp: architecture === 'LlamaForCausalLM' && flag('mlp_bias', false) },
    qkNorm: architecture === 'Qwen3ForCausalLM',
    ropeScaling: scaling,
    paramNames: 'hf',
    rope: 'transformers',
  };
  const ids = (v: unknown) =>
    typeof v === 'number' ? [v] : Array.isArray(v) ? v.filter((x): x is number => typeof x === 'number') : [];
  return {
    dir,
    architecture,
    config,
    raw,
    maxPositionEmbeddings,
    bosTokenId: ids(raw.bos_token_id)[0],
    eosTokenIds: ids(raw.eos_token_id),
  };
}

type Refuse = (field: string, why: string) => ConfigError;

function architectureOf(raw: Record<string, unknown>, refuse: Refuse): HfArchitecture {
  const archs = raw.architectures;
  if (Array.isArray(archs) && archs.length) {
    const known = archs.find((a): a is HfArchitecture => HF_ARCHITECTURES.includes(a as HfArchitecture));
    if (!known)
      throw refuse(
        'architectures',
        `${JSON.stringify(archs)} is not supported (supported: ${HF_ARCHITECTURES.join(', ')})`,
      );
    return known;
  }
  const byType = MODEL_TYPES[String(raw.model_type)];
  if (!byType)
    throw refuse(
      'model_type',
      `${JSON.stringify(raw.model_type)} is not supported (supported: ${Object.keys(MODEL_TYPES).join(', ')})`,
    );
  return byType;
}

/** Fields whose values this engine does not compute. */
function refuseUnsupported(raw: Record<string, unknown>, architecture: HfArchitecture, refuse: Refuse): void {
  const act = raw.hidden_act ?? raw.hidden_activation ?? 'silu';
  if (act !== 'silu') throw refuse('hidden_act', `${JSON.stringify(act)} is not supported (only silu)`);
  for (const key of ['num_experts', 'num_local_experts', 'n_routed_experts']) {
    if (typeof raw[key] === 'number' && (raw[key] as number) > 0)
      throw refuse(key, 'mixture-of-experts layers are not supported');
  }
  if (raw.quantization_config !== undefined && raw.quantization_config !== null)
    throw refuse(
      'quantization_config',
      'quantised checkpoints are not supported (float32, float16 or bfloat16 weights only)',
    );
  const partial = raw.partial_rotary_factor;
  if (partial !== undefined && partial !== null && partial !== 1 && partial !== 1.0)
    throw refuse(
      'partial_rotary_factor',
      `${JSON.stringify(partial)} is not supported (rotary on the whole head only)`,
    );
  const dropout = raw.attention_dropout;
  if (typeof dropout === 'number' && dropout > 0)
    throw refuse('attention_dropout', `${dropout} is not supported (no dropout in this engine; set it to 0.0)`);
  const types = raw.layer_types;
  if (types !== undefined && types !== null) {
    if (!Array.isArray(types)) throw refuse('layer_types', 'must be a list');
    const bad = types.findIndex((t) => t !== 'full_attention');
    if (bad >= 0)
      throw refuse(
        'layer_types',
        `layer ${bad} is ${JSON.stringify(types[bad])}: only full causal attention is supported (no sliding-window layers)`,
      );
  } else if (architecture !== 'LlamaForCausalLM' && raw.use_sliding_window === true && raw.sliding_window !== null) {
    // transformers: layer i slides when i >= max_window_layers (configuration_qwen2/3.py __post_init__)
    const layers = Number(raw.num_hidden_layers);
    const from = typeof raw.max_window_layers === 'number' ? raw.max_window_layers : 28;
    if (from < layers)
      throw refuse(
        'use_sliding_window',
        `sliding-window attention (layers ${from}..${layers - 1}, window ${String(raw.sliding_window)}) is not supported`,
      );
  }
}

/** rope_theta and the scaling rule, from transformers 5's rope_parameters or the Hub's rope_theta + rope_scaling. */
function ropeOf(
  raw: Record<string, unknown>,
  maxPos: number,
  refuse: Refuse,
): { theta: number; scaling: RopeScaling | undefined } {
  const field = raw.rope_scaling ? 'rope_scaling' : raw.rope_parameters ? 'rope_parameters' : 'rope_theta';
  const params = (raw.rope_scaling ?? raw.rope_parameters ?? {}) as Record<string, unknown>;
  if (typeof params !== 'object' || Array.isArray(params)) throw refuse(field, 'must be an object');
  const theta = Number(params.rope_theta ?? raw.rope_theta ?? 10000);
  if (!(theta > 0))
    throw refuse(`${field}.rope_theta`, `must be positive, got ${JSON.stringify(params.rope_theta ?? raw.rope_theta)}`);
  const type = String(params.rope_type ?? params.type ?? 'default');
  const n = (key: string, fallback?: number): number => {
    const v = params[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw refuse(`${field}.${key}`, `must be a number for rope type ${type}, got ${JSON.stringify(params[key])}`);
    return v;
  };
  const original = () =>
    n(
      'original_max_position_embeddings',
      typeof raw.original_max_position_embeddings === 'number' ? raw.original_max_position_embeddings : maxPos,
    );
  switch (type) {
    case 'default':
      return { theta, scaling: undefined };
    case 'linear':
      return { theta, scaling: { type: 'linear', factor: n('factor') } };
    case 'llama3':
      return {
        theta,
        scaling: {
          type: 'llama3',
          factor: n('factor'),
          lowFreqFactor: n('low_freq_factor'),
          highFreqFactor: n('high_freq_factor'),
          originalMaxPositionEmbeddings: original(),
        },
      };
    case 'yarn': {
      const L0 = original();
      const factor = params.factor === undefined || params.factor === null ? maxPos / L0 : n('factor');
      const mscale = params.mscale as number | undefined;
      const mscaleAll = params.mscale_all_dim as number | undefined;
      const get = (s: number, m: number) => (s <= 1 ? 1 : 0.1 * m * Math.log(s) + 1);
      const attentionFactor =
        typeof params.attention_factor === 'number'
          ? params.attention_factor
          : typeof mscale === 'number' && typeof mscaleAll === 'number'
            ? get(factor, mscale) / get(factor, mscaleAll)
            : get(factor, 1);
      return {
        theta,
        scaling: {
          type: 'yarn',
          factor,
          originalMaxPositionEmbeddings: L0,
          betaFast: n('beta_fast', 32),
          betaSlow: n('beta_slow', 1),
          attentionFactor,
          truncate: params.truncate !== false,
        },
      };
    }
    default:
      throw refuse(`${field}.rope_type`, `${JSON.stringify(type)} is not supported (default, linear, llama3, yarn)`);
  }
}

/**
 * Configuration and parameter layout of the embedded decoder-only transformer: the nano models and the
 * Hugging Face Llama / Qwen2 / Qwen3 checkpoints, which are the same graph with a few switches (GQA,
 * an explicit head size, q/k/v biases, per-head q/k RMSNorm, rotary scaling, tied or untied head).
 * Dimension names: V vocab, C d_model, L layers, NH query heads, NKV key/value heads, hd head size,
 * Cq = NH·hd, Ckv = NKV·hd, F d_ff, maxT context. Every parameter tensor is named here with its shape
 * (the model's own names, or the HF ones); all live as views into one Float32Array arena (params.ts).
 * Linear weights are stored [out, in] and applied as x · Wᵀ (kernels.matmulBT).
 *
 * Forward (per layer l):  h = rmsnorm(x) * attn_norm;  q,k,v = h·Wqᵀ+bq, h·Wkᵀ+bk, h·Wvᵀ+bv;
 *   [q,k = per-head rmsnorm(q,k) * q_norm,k_norm];  rotary on q,k;  x += attention(q,k,v) · Woᵀ;
 *   h = rmsnorm(x) * mlp_norm;  x += (silu(h·Wgateᵀ) ⊙ h·Wupᵀ) · Wdownᵀ.
 * Then logits = rmsnorm(x) * final_norm · lm_headᵀ (lm_head = tok_emb when tied).
 * Rotary ("NeoX" half-split): within a head, pair dimension i with i + hd/2 for i < hd/2, angle
 *   pos * inv_freq[i], inv_freq[i] = ropeTheta^(-2i/hd) (scaled by ropeScaling).
 */
import { ConfigError } from '../../core/errors.js';

export interface NanoConfig {
  /** V: vocabulary size. */
  vocabSize: number;
  /** C: model width. */
  dModel: number;
  /** L: number of transformer blocks. */
  nLayers: number;
  /** NH: attention (query) heads. */
  nHeads: number;
  /** F: hidden width of the gated MLP. */
  dFF: number;
  /** maxT: maximum sequence length (prompt + response). */
  contextLength: number;
  /** Share the output head with the token embedding. */
  tieEmbeddings: boolean;
  /** Rotary base. */
  ropeTheta: number;
  /** RMSNorm epsilon. */
  normEps: number;
  /** NKV: key/value heads (grouped-query attention: query head h reads kv head ⌊h·NKV/NH⌋). Default NH. */
  nKVHeads?: number;
  /** hd: head size (Qwen3 sets it apart from C/NH). Default C/NH. */
  headDim?: number;
  /** Linear layers with a bias: q/k/v (Qwen2; Llama attention_bias), o (Llama attention_bias), the MLP's (mlp_bias). */
  bias?: { qkv?: boolean; o?: boolean; mlp?: boolean };
  /** Per-head RMSNorm of q and k over hd (one weight [hd] each) before rotary positions (Qwen3). */
  qkNorm?: boolean;
  /** Rotary frequency scaling (Hugging Face rope_parameters); absent = default rotary. */
  ropeScaling?: RopeScaling;
  /**
   * Parameter names: 'nano' (tok_emb, layers.l.wq, ...; the embedded model's own checkpoints) or 'hf'
   * (model.embed_tokens.weight, model.layers.l.self_attn.q_proj.weight, ...; Hugging Face checkpoints).
   * Default 'nano'.
   */
  paramNames?: 'nano' | 'hf';
  /**
   * How the rotary tables are computed: 'arbor' (float64, then rounded) or 'transformers' (in float32 as
   * transformers computes inv_freq and the angles, with `ropeScaling`; what Hugging Face weights were
   * trained with). Default 'arbor'.
   */
  rope?: 'arbor' | 'transformers';
}

/**
 * Rotary scaling rules (transformers modeling_rope_utils: _compute_linear/llama3/yarn_parameters).
 * `linear`: inv_freq / factor. `llama3`: wavelength-dependent blend. `yarn`: ramp between interpolated
 * and extrapolated frequencies, and cos/sin scaled by an attention factor.
 */
export type RopeScaling =
  | { type: 'linear'; factor: number }
  | {
      type: 'llama3';
      factor: number;
      lowFreqFactor: number;
      highFreqFactor: number;
      originalMaxPositionEmbeddings: number;
    }
  | {
      type: 'yarn';
      factor: number;
      originalMaxPositionEmbeddings: number;
      betaFast: number;
      betaSlow: number;
      attentionFactor: number;
      truncate: boolean;
    };

/** The derived dimensions of a config (Cq = NH·hd query width, Ckv = NKV·hd key/value width). */
export interface ModelDims {
  V: number;
  C: number;
  L: number;
  NH: number;
  NKV: number;
  hd: number;
  Cq: number;
  Ckv: number;
  F: number;
}

export function modelDims(c: NanoConfig): ModelDims {
  const NH = c.nHeads;
  const NKV = c.nKVHeads ?? NH;
  const hd = c.headDim ?? c.dModel / NH;
  return { V: c.vocabSize, C: c.dModel, L: c.nLayers, NH, NKV, hd, Cq: NH * hd, Ckv: NKV * hd, F: c.dFF };
}

export const defaultNanoConfig: NanoConfig = {
  vocabSize: 64,
  dModel: 128,
  nLayers: 4,
  nHeads: 4,
  dFF: 384,
  contextLength: 256,
  tieEmbeddings: true,
  ropeTheta: 10000,
  normEps: 1e-5,
};

export function validateNanoConfig(c: NanoConfig): void {
  const positive = ['vocabSize', 'dModel', 'nLayers', 'nHeads', 'dFF', 'contextLength'] as const;
  for (const k of positive) {
    if (!Number.isInteger(c[k]) || c[k] <= 0)
      throw new ConfigError(`model.${k} must be a positive integer, got ${c[k]}`, `model.${k}`);
  }
  const { NH, NKV, hd } = modelDims(c);
  if (c.headDim === undefined && c.dModel % c.nHeads !== 0)
    throw new ConfigError(`model.dModel (${c.dModel}) must be divisible by model.nHeads (${c.nHeads})`, 'model.nHeads');
  if (!Number.isInteger(hd) || hd <= 0 || hd % 2 !== 0)
    throw new ConfigError(`head size ${hd} must be an even positive integer for rotary positions`, 'model.nHeads');
  if (!Number.isInteger(NKV) || NKV <= 0 || NH % NKV !== 0)
    throw new ConfigError(`key/value heads (${NKV}) must divide the attention heads (${NH})`, 'model.nKVHeads');
}

/** One named parameter tensor. */
export interface ParamSpec {
  name: string;
  shape: number[];
  /** "normal" = N(0, std), "ones" = 1 (norm gains), "zeros" = 0 (biases). */
  init: 'normal' | 'ones' | 'zeros';
  std?: number;
}

/** Roles of a layer's parameters (a role absent from the config has no tensor). */
export type LayerRole =
  | 'attnNorm'
  | 'wq'
  | 'bq'
  | 'wk'
  | 'bk'
  | 'wv'
  | 'bv'
  | 'wo'
  | 'bo'
  | 'qNorm'
  | 'kNorm'
  | 'mlpNorm'
  | 'wGate'
  | 'bGate'
  | 'wUp'
  | 'bUp'
  | 'wDown'
  | 'bDown';

/** The tensor name of every role: the model's own names, or the Hugging Face ones. */
export interface ParamNames {
  embed: string;
  finalNorm: string;
  /** The output head [V, C]: the embedding when tied. */
  head: string;
  layers: Array<Record<LayerRole, string>>;
}

const HF_LAYER: Record<LayerRole, string> = {
  attnNorm: 'input_layernorm.weight',
  wq: 'self_attn.q_proj.weight',
  bq: 'self_attn.q_proj.bias',
  wk: 'self_attn.k_proj.weight',
  bk: 'self_attn.k_proj.bias',
  wv: 'self_attn.v_proj.weight',
  bv: 'self_attn.v_proj.bias',
  wo: 'self_attn.o_proj.weight',
  bo: 'self_attn.o_proj.bias',
  qNorm: 'self_attn.q_norm.weight',
  kNorm: 'self_attn.k_norm.weight',
  mlpNorm: 'post_attention_layernorm.weight',
  wGate: 'mlp.gate_proj.weight',
  bGate: 'mlp.gate_proj.bias',
  wUp: 'mlp.up_proj.weight',
  bUp: 'mlp.up_proj.bias',
  wDown: 'mlp.down_proj.weight',
  bDown: 'mlp.down_proj.bias',
};
const NANO_LAYER: Record<LayerRole, string> = {
  attnNorm: 'attn_norm',
  wq: 'wq',
  bq: 'bq',
  wk: 'wk',
  bk: 'bk',
  wv: 'wv',
  bv: 'bv',
  wo: 'wo',
  bo: 'bo',
  qNorm: 'q_norm',
  kNorm: 'k_norm',
  mlpNorm: 'mlp_norm',
  wGate: 'w_gate',
  bGate: 'b_gate',
  wUp: 'w_up',
  bUp: 'b_up',
  wDown: 'w_down',
  bDown: 'b_down',
};

export function paramNames(c: NanoConfig): ParamNames {
  const hf = c.paramNames === 'hf';
  const prefix = hf ? 'model.layers.' : 'layers.';
  const table = hf ? HF_LAYER : NANO_LAYER;
  const layers = Array.from({ length: c.nLayers }, (_, l) => {
    const entries = Object.entries(table).map(([role, name]) => [role, `${prefix}${l}.${name}`]);
    return Object.fromEntries(entries) as Record<LayerRole, string>;
  });
  const embed = hf ? 'model.embed_tokens.weight' : 'tok_emb';
  return {
    embed,
    finalNorm: hf ? 'model.norm.weight' : 'final_norm',
    head: c.tieEmbeddings ? embed : hf ? 'lm_head.weight' : 'lm_head',
    layers,
  };
}

/** The ordered parameter list for a config (the order of the arena and of checkpoints). */
export function paramSpecs(c: NanoConfig): ParamSpec[] {
  const { V, C, L, F, Cq, Ckv, hd } = modelDims(c);
  const std = 0.02;
  const projStd = 0.02 / Math.sqrt(2 * L);
  const names = paramNames(c);
  const specs: ParamSpec[] = [{ name: names.embed, shape: [V, C], init: 'normal', std }];
  const bias = c.bias ?? {};
  for (let l = 0; l < L; l++) {
    const n = names.layers[l];
    const zero = (role: LayerRole, size: number, on: boolean | undefined) =>
      on ? [{ name: n[role], shape: [size], init: 'zeros' as const }] : [];
    specs.push(
      { name: n.attnNorm, shape: [C], init: 'ones' },
      { name: n.wq, shape: [Cq, C], init: 'normal', std },
      ...zero('bq', Cq, bias.qkv),
      { name: n.wk, shape: [Ckv, C], init: 'normal', std },
      ...zero('bk', Ckv, bias.qkv),
      { name: n.wv, shape: [Ckv, C], init: 'normal', std },
      ...zero('bv', Ckv, bias.qkv),
      { name: n.wo, shape: [C, Cq], init: 'normal', std: projStd },
      ...zero('bo', C, bias.o),
    );
    if (c.qkNorm)
      specs.push({ name: n.qNorm, shape: [hd], init: 'ones' }, { name: n.kNorm, shape: [hd], init: 'ones' });
    specs.push(
      { name: n.mlpNorm, shape: [C], init: 'ones' },
      { name: n.wGate, shape: [F, C], init: 'normal', std },
      ...zero('bGate', F, bias.mlp),
      { name: n.wUp, shape: [F, C], init: 'normal', std },
      ...zero('bUp', F, bias.mlp),
      { name: n.wDown, shape: [C, F], init: 'normal', std: projStd },
      ...zero('bDown', C, bias.mlp),
    );
  }
  specs.push({ name: names.finalNorm, shape: [C], init: 'ones' });
  if (!c.tieEmbeddings) specs.push({ name: names.head, shape: [V, C], init: 'normal', std });
  return specs;
}

export function numel(shape: number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function parameterCount(c: NanoConfig): number {
  return paramSpecs(c).reduce((s, p) => s + numel(p.shape), 0);
}

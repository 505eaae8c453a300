/**
 * Configuration and parameter layout of the embedded decoder-only transformer ("nano").
 * Dimension names: V vocab, C d_model, L layers, NH heads, hs = C/NH head size, F d_ff, maxT context.
 * Every parameter tensor is named here with its shape; all live as views into one Float32Array arena
 * (see NanoParams) so optimiser and checkpoint code iterate one list. Linear weights are stored
 * [out, in] and applied as x · Wᵀ (kernels.matmulBT).
 *
 * Forward (per layer l):  h = rmsnorm(x) * attn_norm;  q,k,v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ;  rotary on q,k;
 *   x += attention(q,k,v) · Woᵀ;  h = rmsnorm(x) * mlp_norm;  x += (silu(h·Wgateᵀ) ⊙ h·Wupᵀ) · Wdownᵀ.
 * Then logits = rmsnorm(x) * final_norm · lm_headᵀ (lm_head = tok_emb when tied).
 * Rotary ("NeoX" half-split): within a head, pair dimension i with i + hs/2 for i < hs/2, angle
 *   pos * ropeTheta^(-2i/hs).
 */
import { ConfigError } from '../../core/errors.js';

export interface NanoConfig {
  /** V: vocabulary size. */
  vocabSize: number;
  /** C: model width. */
  dModel: number;
  /** L: number of transformer blocks. */
  nLayers: number;
  /** NH: attention heads (C must be divisible by NH, and hs = C/NH must be even). */
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
    if (!Number.isInteger(c[k]) || c[k] <= 0) throw new ConfigError(`model.${k} must be a positive integer, got ${c[k]}`, `model.${k}`);
  }
  if (c.dModel % c.nHeads !== 0) throw new ConfigError(`model.dModel (${c.dModel}) must be divisible by model.nHeads (${c.nHeads})`, 'model.nHeads');
  if ((c.dModel / c.nHeads) % 2 !== 0) throw new ConfigError(`head size dModel/nHeads must be even for rotary positions`, 'model.nHeads');
}

/** One named parameter tensor. */
export interface ParamSpec {
  name: string;
  shape: number[];
  /** "normal" = N(0, std), "ones" = 1 (norm gains). */
  init: 'normal' | 'ones';
  std?: number;
}

/** The ordered parameter list for a config (the order of the arena and of checkpoints). */
export function paramSpecs(c: NanoConfig): ParamSpec[] {
  const { vocabSize: V, dModel: C, nLayers: L, dFF: F } = c;
  const std = 0.02;
  const projStd = 0.02 / Math.sqrt(2 * L);
  const specs: ParamSpec[] = [{ name: 'tok_emb', shape: [V, C], init: 'normal', std }];
  for (let l = 0; l < L; l++) {
    const p = `layers.${l}.`;
    specs.push(
      { name: p + 'attn_norm', shape: [C], init: 'ones' },
      { name: p + 'wq', shape: [C, C], init: 'normal', std },
      { name: p + 'wk', shape: [C, C], init: 'normal', std },
      { name: p + 'wv', shape: [C, C], init: 'normal', std },
      { name: p + 'wo', shape: [C, C], init: 'normal', std: projStd },
      { name: p + 'mlp_norm', shape: [C], init: 'ones' },
      { name: p + 'w_gate', shape: [F, C], init: 'normal', std },
      { name: p + 'w_up', shape: [F, C], init: 'normal', std },
      { name: p + 'w_down', shape: [C, F], init: 'normal', std: projStd },
    );
  }
  specs.push({ name: 'final_norm', shape: [C], init: 'ones' });
  if (!c.tieEmbeddings) specs.push({ name: 'lm_head', shape: [V, C], init: 'normal', std });
  return specs;
}

export function numel(shape: number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function parameterCount(c: NanoConfig): number {
  return paramSpecs(c).reduce((s, p) => s + numel(p.shape), 0);
}

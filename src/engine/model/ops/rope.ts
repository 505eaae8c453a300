/**
 * Rotary position tables, "NeoX" half-split: within each head (size hd), dimension i < hd/2 pairs with
 * i + hd/2 and rotates by angle pos · inv_freq[i]. Tables hold cos/sin [maxT, hd/2], allocated by
 * `alloc` (the kernels' memory, so the rotation kernel reads them in place); the rotation itself is
 * the `rope` kernel (kernels/types.ts). Nano models keep their float64-angle tables; Hugging Face
 * models get transformers' float32 computation (inv_freq, pos·inv_freq and cos/sin in float32, then
 * times the attention factor), including the linear / llama3 / yarn frequency rules.
 */
import type { RopeScaling } from '../config.js';

export interface RopeTables {
  /** hd/2 */
  half: number;
  /** [maxT, half] */
  cos: Float32Array;
  /** [maxT, half] */
  sin: Float32Array;
}

export function ropeTables(
  maxT: number,
  headSize: number,
  theta: number,
  alloc: (n: number) => Float32Array = (n) => new Float32Array(n),
): RopeTables {
  const half = headSize / 2;
  const cos = alloc(maxT * half);
  const sin = alloc(maxT * half);
  for (let p = 0; p < maxT; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p * Math.pow(theta, (-2 * i) / headSize);
      // float32 values whatever the array type (the float64 reference backend must see the same table)
      cos[p * half + i] = Math.fround(Math.cos(angle));
      sin[p * half + i] = Math.fround(Math.sin(angle));
    }
  }
  return { half, cos, sin };
}

const f = Math.fround;

/**
 * inv_freq [hd/2] and the attention factor of transformers' rotary embedding
 * (modeling_rope_utils.py _compute_default/linear/llama3/yarn_parameters), in float32 like torch.
 */
export function hfRopeFrequencies(
  hd: number,
  theta: number,
  scaling?: RopeScaling,
): { invFreq: Float64Array; attentionFactor: number } {
  const half = hd / 2;
  const base = new Float64Array(half);
  for (let i = 0; i < half; i++) base[i] = f(1 / f(Math.pow(theta, f(f(2 * i) / hd))));
  if (!scaling) return { invFreq: base, attentionFactor: 1 };
  if (scaling.type === 'linear') return { invFreq: base.map((x) => f(x / scaling.factor)), attentionFactor: 1 };
  if (scaling.type === 'llama3') {
    // torch's float32 order of operations (python scalars become float32 operands), _compute_llama3_parameters
    const { factor, lowFreqFactor: lo, highFreqFactor: hi, originalMaxPositionEmbeddings: L0 } = scaling;
    const lowWavelen = f(L0 / lo);
    const highWavelen = f(L0 / hi);
    const invFreq = base.map((inv) => {
      const wavelen = f(f(2 * Math.PI) / inv);
      if (wavelen > lowWavelen) return f(inv / factor);
      if (wavelen < highWavelen) return inv;
      const smooth = f(f(f(f(L0) / wavelen) - lo) / f(hi - lo));
      return f(f(f(f(1 - smooth) * inv) / factor) + f(smooth * inv));
    });
    return { invFreq, attentionFactor: 1 };
  }
  // yarn
  const { factor, originalMaxPositionEmbeddings: L0, betaFast, betaSlow, truncate } = scaling;
  const corr = (rotations: number) => (hd * Math.log(L0 / (rotations * 2 * Math.PI))) / (2 * Math.log(theta));
  let low = corr(betaFast);
  let high = corr(betaSlow);
  if (truncate) {
    low = Math.floor(low);
    high = Math.ceil(high);
  }
  low = Math.max(low, 0);
  high = Math.min(high, hd - 1);
  if (low === high) high += 0.001;
  const invFreq = new Float64Array(half);
  for (let i = 0; i < half; i++) {
    const posFreq = f(Math.pow(theta, f(f(2 * i) / hd)));
    const extrapolation = f(1 / posFreq);
    const interpolation = f(1 / f(factor * posFreq));
    const ramp = Math.min(1, Math.max(0, f((i - low) / (high - low))));
    const extrapolationWeight = f(1 - ramp);
    invFreq[i] = f(f(interpolation * f(1 - extrapolationWeight)) + f(extrapolation * extrapolationWeight));
  }
  return { invFreq, attentionFactor: scaling.attentionFactor };
}

/** Tables as transformers computes them: angle = f32(pos · inv_freq), cos/sin in float32 times the attention factor. */
export function hfRopeTables(
  maxT: number,
  hd: number,
  theta: number,
  scaling: RopeScaling | undefined,
  alloc: (n: number) => Float32Array = (n) => new Float32Array(n),
): RopeTables {
  const half = hd / 2;
  const { invFreq, attentionFactor } = hfRopeFrequencies(hd, theta, scaling);
  const cos = alloc(maxT * half);
  const sin = alloc(maxT * half);
  for (let p = 0; p < maxT; p++) {
    for (let i = 0; i < half; i++) {
      const angle = f(p * invFreq[i]);
      cos[p * half + i] = f(f(Math.cos(angle)) * attentionFactor);
      sin[p * half + i] = f(f(Math.sin(angle)) * attentionFactor);
    }
  }
  return { half, cos, sin };
}

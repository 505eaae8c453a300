/**
 * A linear layer of the model, shared by the training forward (forward.ts) and incremental decoding
 * (decode.ts): y[N,out] (+)= x[N,in]·Wᵀ + b + s·(x·Aᵀ)·Bᵀ, where b is an optional bias and A [r,in],
 * B [out,r] an optional LoRA (lora.ts) with scale s. `h` [N,r] receives s·(x·Aᵀ), which the backward
 * of the adapter needs. Also the small row-wise helpers of biases and grouped-query attention.
 */
import type { Kernels } from '../../kernels/types.js';

export interface LinearLora {
  A: Float32Array;
  B: Float32Array;
  rank: number;
  scale: number;
  /** [N, r] receives s·(x·Aᵀ). */
  h: Float32Array;
}

export function linearForward(
  k: Kernels,
  y: Float32Array,
  x: Float32Array,
  W: Float32Array,
  bias: Float32Array | undefined,
  lora: LinearLora | undefined,
  N: number,
  inDim: number,
  outDim: number,
  accumulate: boolean,
): void {
  k.matmulBT(y, x, W, N, inDim, outDim, accumulate);
  if (bias) addBias(y, bias, N, outDim);
  if (lora) {
    k.matmulBT(lora.h, x, lora.A, N, inDim, lora.rank, false);
    scaleInPlace(lora.h, lora.scale, N * lora.rank);
    k.matmulBT(y, lora.h, lora.B, N, lora.rank, outDim, true);
  }
}

/** y[n, c] += b[c] over N rows. */
export function addBias(y: Float32Array, b: Float32Array, N: number, C: number): void {
  for (let n = 0; n < N; n++) {
    const o = n * C;
    for (let c = 0; c < C; c++) y[o + c] += b[c];
  }
}

/** db[c] += Σ_n dy[n, c]. */
export function addColumnSums(db: Float32Array, dy: Float32Array, N: number, C: number): void {
  for (let n = 0; n < N; n++) {
    const o = n * C;
    for (let c = 0; c < C; c++) db[c] += dy[o + c];
  }
}

export function scaleInPlace(x: Float32Array, s: number, n: number): void {
  if (s === 1) return;
  for (let i = 0; i < n; i++) x[i] *= s;
}

/** out[N, NKV·rep·hd] = each kv head of x [N, NKV·hd] repeated `rep` times (transformers' repeat_kv). */
export function repeatKV(out: Float32Array, x: Float32Array, N: number, NKV: number, rep: number, hd: number): void {
  const Ckv = NKV * hd;
  const Cq = Ckv * rep;
  for (let n = 0; n < N; n++) {
    for (let g = 0; g < NKV; g++) {
      const src = x.subarray(n * Ckv + g * hd, n * Ckv + (g + 1) * hd);
      for (let r = 0; r < rep; r++) out.set(src, n * Cq + (g * rep + r) * hd);
    }
  }
}

/** out[N, NKV·hd] = the sum over each group of `rep` expanded heads of dx [N, NKV·rep·hd] (repeat_kv's backward). */
export function sumKV(out: Float32Array, dx: Float32Array, N: number, NKV: number, rep: number, hd: number): void {
  const Ckv = NKV * hd;
  const Cq = Ckv * rep;
  for (let n = 0; n < N; n++) {
    for (let g = 0; g < NKV; g++) {
      const o = n * Ckv + g * hd;
      const base = n * Cq + g * rep * hd;
      for (let i = 0; i < hd; i++) {
        let s = 0;
        for (let r = 0; r < rep; r++) s += dx[base + r * hd + i];
        out[o + i] = s;
      }
    }
  }
}

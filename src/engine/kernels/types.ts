/**
 * The kernel interface shared by the WASM SIMD kernels and their plain-TypeScript reference.
 * Shapes use B (batch), T (time), C (channels), NH (heads), M/K/N (matmul dims); buffers are
 * row-major Float32Arrays (any subarray view is fine). Functions named *Backward ACCUMULATE into
 * their d* outputs (the caller zeroes them); forward outputs are overwritten unless `accumulate`.
 * `alloc` returns arrays living in kernel memory, which the WASM backend uses without copying.
 */
export interface Kernels {
  /** "wasm-simd", "wasm-simd-2t", "reference", ... */
  readonly name: string;
  /** A zeroed Float32Array of n elements in kernel memory (zero-copy for WASM kernels). */
  alloc(n: number): Float32Array;

  /** out[M,N] (+)= a[M,K] · b[K,N] */
  matmul(out: Float32Array, a: Float32Array, b: Float32Array, M: number, K: number, N: number, accumulate: boolean): void;
  /** out[M,N] (+)= a[M,K] · b[N,K]ᵀ  (linear layer forward: x · Wᵀ) */
  matmulBT(out: Float32Array, a: Float32Array, b: Float32Array, M: number, K: number, N: number, accumulate: boolean): void;
  /** out[M,N] (+)= a[K,M]ᵀ · b[K,N]  (weight gradient: doutᵀ · x) */
  matmulAT(out: Float32Array, a: Float32Array, b: Float32Array, M: number, K: number, N: number, accumulate: boolean): void;

  /** out[N,C] = x / rms(x) * weight[C]; rstd[N] = 1/sqrt(mean(x²)+eps) saved for backward. */
  rmsnormForward(out: Float32Array, rstd: Float32Array, x: Float32Array, weight: Float32Array, N: number, C: number, eps: number): void;
  /** dx[N,C] += ..., dweight[C] += ... given dout[N,C], x, weight, rstd from forward. */
  rmsnormBackward(dx: Float32Array, dweight: Float32Array, dout: Float32Array, x: Float32Array, weight: Float32Array, rstd: Float32Array, N: number, C: number): void;

  /** out[N,C] = softmax(x) row-wise (out may alias x). */
  softmaxForward(out: Float32Array, x: Float32Array, N: number, C: number): void;
  /** out[N,C] = log_softmax(x) row-wise (out may alias x). */
  logSoftmaxForward(out: Float32Array, x: Float32Array, N: number, C: number): void;
  /** dx[N,C] += y ⊙ (dout − Σ dout⊙y) for y = softmax output. */
  softmaxBackward(dx: Float32Array, dout: Float32Array, y: Float32Array, N: number, C: number): void;
  /** dx[N,C] += dout − softmax(x)·Σ dout, for y = log_softmax output (softmax = exp(y)). */
  logSoftmaxBackward(dx: Float32Array, dout: Float32Array, y: Float32Array, N: number, C: number): void;

  /**
   * Causal multi-head self-attention. q,k,v,out: [B,T,C] with heads interleaved (C = NH·hs);
   * att: [B,NH,T,T] receives the probabilities (row t valid for keys 0..t, rest zero).
   * Scores are scaled by 1/sqrt(hs).
   */
  attentionForward(out: Float32Array, att: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array, B: number, T: number, C: number, NH: number): void;
  /** Accumulates dq, dk, dv [B,T,C] given dout [B,T,C] and att from forward. */
  attentionBackward(dq: Float32Array, dk: Float32Array, dv: Float32Array, dout: Float32Array, att: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array, B: number, T: number, C: number, NH: number): void;
}

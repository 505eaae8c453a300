/**
 * The kernel interface shared by the WASM SIMD kernels and their plain-TypeScript reference.
 * Shapes use B (batch), T (time), C (channels), NH (heads), M/K/N (matmul dims); buffers are
 * row-major arrays of element type F (any subarray view is fine). Functions named *Backward
 * ACCUMULATE into their d* outputs (the caller zeroes them), except swigluBackward and
 * attentionBackward, which WRITE them (each of those gradients has that one source, so a caller
 * would only zero them first); forward outputs are overwritten unless `accumulate`.
 * `alloc` returns arrays living in kernel memory, which the WASM backend uses without copying.
 * F defaults to Float32Array, the type of every training backend; only the float64 reference used
 * by gradient checks is a Kernels<Float64Array>.
 */
/** The scalars of one AdamW update (bias corrections bc1 = 1 − β1^t, bc2 = 1 − β2^t). */
export interface AdamWStep {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  bc1: number;
  bc2: number;
  gradScale: number;
}

/** The element types a kernel backend may use. */
export type FloatArray = Float32Array | Float64Array;

export interface Kernels<F extends FloatArray = Float32Array> {
  /** "wasm-simd", "wasm-simd-fma-4t" (4 threads), "reference", "reference-f64", ... */
  readonly name: string;
  /** A zeroed array of n elements in kernel memory (zero-copy for WASM kernels). */
  alloc(n: number): F;

  /** out[M,N] (+)= a[M,K] · b[K,N] */
  matmul(out: F, a: F, b: F, M: number, K: number, N: number, accumulate: boolean): void;
  /** out[M,N] (+)= a[M,K] · b[N,K]ᵀ  (linear layer forward: x · Wᵀ) */
  matmulBT(out: F, a: F, b: F, M: number, K: number, N: number, accumulate: boolean): void;
  /** out[M,N] (+)= a[K,M]ᵀ · b[K,N]  (weight gradient: doutᵀ · x) */
  matmulAT(out: F, a: F, b: F, M: number, K: number, N: number, accumulate: boolean): void;

  /** out[N,C] = x / rms(x) * weight[C]; rstd[N] = 1/sqrt(mean(x²)+eps) saved for backward. */
  rmsnormForward(out: F, rstd: F, x: F, weight: F, N: number, C: number, eps: number): void;
  /** dx[N,C] += ..., dweight[C] += ... given dout[N,C], x, weight, rstd from forward. */
  rmsnormBackward(dx: F, dweight: F, dout: F, x: F, weight: F, rstd: F, N: number, C: number): void;

  /** out[N,C] = softmax(x) row-wise (out may alias x). */
  softmaxForward(out: F, x: F, N: number, C: number): void;
  /** out[N,C] = log_softmax(x) row-wise (out may alias x). */
  logSoftmaxForward(out: F, x: F, N: number, C: number): void;
  /** dx[N,C] += y ⊙ (dout − Σ dout⊙y) for y = softmax output. */
  softmaxBackward(dx: F, dout: F, y: F, N: number, C: number): void;
  /** dx[N,C] += dout − softmax(x)·Σ dout, for y = log_softmax output (softmax = exp(y)). */
  logSoftmaxBackward(dx: F, dout: F, y: F, N: number, C: number): void;

  /**
   * Rotary positions in place on x [N, C] (C = NH·hs), NeoX half-split: in each head, dimension
   * i < hs/2 pairs with i + hs/2 and rotates by the angle of (positions[n], i), whose cosine and sine
   * are cos/sin [maxT, hs/2]. `inverse` applies the transpose rotation (backward: d(in) from d(out)).
   */
  rope(x: F, positions: Int32Array, N: number, C: number, NH: number, cos: F, sin: F, inverse: boolean): void;

  /** Gated MLP activation over n elements: out = silu(gate) ⊙ up, silu(g) = g·σ(g). */
  swigluForward(out: F, gate: F, up: F, n: number): void;
  /** Writes dgate = dout ⊙ up ⊙ σ(g)·(1 + g·(1 − σ(g))), dup = dout ⊙ silu(g). */
  swigluBackward(dgate: F, dup: F, dout: F, gate: F, up: F, n: number): void;

  /**
   * Causal multi-head self-attention over a packed batch: sequence b has lengths[b] rows, the
   * sequences back to back in q, k, v, out [Σ T_b, C] (heads interleaved, C = NH·hs); att holds each
   * sequence's probabilities [NH, T_b, T_b], back to back in the same order (row t valid for keys
   * 0..t, the rest zero). Scores are scaled by 1/sqrt(hs). `attentionLayout` (reference.ts) gives
   * the offsets.
   */
  attentionForward(out: F, att: F, q: F, k: F, v: F, lengths: readonly number[], C: number, NH: number): void;
  /** Writes dq, dk, dv [Σ T_b, C] given dout and att from forward (same packing). */
  attentionBackward(
    dq: F,
    dk: F,
    dv: F,
    dout: F,
    att: F,
    q: F,
    k: F,
    v: F,
    lengths: readonly number[],
    C: number,
    NH: number,
  ): void;
  /**
   * Causal multi-head attention over a packed forest (kernels/tree.ts): N unique tokens in DFS order,
   * each row attending to its ancestors and itself, whose key ranges `layout` lists. q, k, v, out
   * [N, C] as attentionForward; att holds head h's probabilities at h·visible, each row's (its
   * position + 1 of them) at its segment's offset. Scores are scaled by 1/sqrt(hs).
   */
  treeAttentionForward(out: F, att: F, q: F, k: F, v: F, layout: Int32Array, C: number, NH: number): void;
  /** Writes dq, dk, dv [N, C] given dout and att from treeAttentionForward (same layout). */
  treeAttentionBackward(
    dq: F,
    dk: F,
    dv: F,
    dout: F,
    att: F,
    q: F,
    k: F,
    v: F,
    layout: Int32Array,
    C: number,
    NH: number,
  ): void;
  /**
   * The gradient of a token-level loss w.r.t. the logits, from log-softmax rows lsm [N, V]: per row,
   * p = exp(lsm), entropy[n] = H = −Σ p·lsm, and dlogits[n] = p ⊙ (bonus[n]·(lsm + H) − coef[n]) with
   * coef[n] added at targets[n] (overwrites dlogits). coef[n] is d loss / d lsm[n, targets[n]]; bonus[n]
   * weighs an entropy bonus (loss −= bonus·H).
   */
  logitGrad(dlogits: F, entropy: F, lsm: F, coef: F, bonus: F, targets: Int32Array, N: number, V: number): void;

  /**
   * AdamW on n parameters x with gradients g (times gradScale) and moments m, v:
   * m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²; x −= lr·(m/bc1 / (√(v/bc2) + eps) + wd·x).
   */
  adamw(x: F, g: F, m: F, v: F, n: number, h: AdamWStep): void;

  /**
   * Optional (WASM backends): one query row attending over T contiguous cached positions with
   * grouped-query attention: q, out [NH·hd]; k, v [T, NKV·hd]; query head h reads key/value head
   * ⌊h / (NH/NKV)⌋ (NKV divides NH; NKV = NH is multi-head attention); scores scaled by 1/sqrt(hd).
   * Writes out. Incremental decoding uses it when present and its own float64 loop otherwise
   * (`decodeAttentionRef` in reference.ts is the oracle).
   */
  decodeAttention?(out: F, q: F, k: F, v: F, T: number, NH: number, NKV: number, hd: number): void;

  /**
   * Optional (WASM backends): token sampling's pass over logit rows x [N, V] at inverse temperatures
   * invT [N]: out = exp((x − max x)·invT) (unnormalised; may alias x) and stats [N, 3] = (logsumexp of
   * x·invT, entropy of softmax(x·invT), Σ out), the sums in float64 (`samplingStatsRef` is the oracle).
   */
  samplingStats?(out: F, stats: Float64Array, x: F, invT: F, N: number, V: number): void;

  /**
   * Optional (WASM backends): decodeAttention for R query rows at once over a paged KV cache, reading the
   * cached rows where they lie. q, out [R, NH·hd]. Row r attends over positions 0..lengths[r]−1 of its
   * sequence; position s is row s mod P of layer `layer` of page pages[r·W + ⌊s/P⌋], whose storage
   * [L, P, NKV·hd] is kPages[page] / vPages[page] (arrays in kernel memory are read in place, others
   * copied). Incremental decoding uses it when present (`pagedDecodeAttentionRef` is the oracle).
   */
  pagedDecodeAttention?(
    out: F,
    q: F,
    kPages: readonly F[],
    vPages: readonly F[],
    pages: Int32Array,
    W: number,
    lengths: Int32Array,
    R: number,
    layer: number,
    P: number,
    NH: number,
    NKV: number,
    hd: number,
  ): void;
}

/**
 * Plain-TypeScript reference kernels: the oracle every WASM kernel is tested against, and the
 * fallback when WebAssembly SIMD is unavailable. Written for clarity, not speed. See types.ts.
 * Arithmetic is in JS doubles; results round to the buffers' element type on store, so
 * `referenceKernels` (Float32Array buffers) is float32 and `referenceKernels64` (Float64Array
 * buffers, for gradient checks by finite differences) is float64 end to end.
 */
import type { AdamWStep, FloatArray, Kernels } from './types.js';
import { segmentKeys, treeRows, treeSegment, treeVisible } from './tree.js';

export function matmulRef(
  out: FloatArray,
  a: FloatArray,
  b: FloatArray,
  M: number,
  K: number,
  N: number,
  accumulate: boolean,
): void {
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let s = 0;
      for (let p = 0; p < K; p++) s += a[i * K + p] * b[p * N + j];
      out[i * N + j] = accumulate ? out[i * N + j] + s : s;
    }
  }
}

export function matmulBTRef(
  out: FloatArray,
  a: FloatArray,
  b: FloatArray,
  M: number,
  K: number,
  N: number,
  accumulate: boolean,
): void {
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let s = 0;
      for (let p = 0; p < K; p++) s += a[i * K + p] * b[j * K + p];
      out[i * N + j] = accumulate ? out[i * N + j] + s : s;
    }
  }
}

export function matmulATRef(
  out: FloatArray,
  a: FloatArray,
  b: FloatArray,
  M: number,
  K: number,
  N: number,
  accumulate: boolean,
): void {
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let s = 0;
      for (let p = 0; p < K; p++) s += a[p * M + i] * b[p * N + j];
      out[i * N + j] = accumulate ? out[i * N + j] + s : s;
    }
  }
}

export function rmsnormForwardRef(
  out: FloatArray,
  rstd: FloatArray,
  x: FloatArray,
  weight: FloatArray,
  N: number,
  C: number,
  eps: number,
): void {
  for (let n = 0; n < N; n++) {
    let ss = 0;
    for (let c = 0; c < C; c++) ss += x[n * C + c] * x[n * C + c];
    const r = 1 / Math.sqrt(ss / C + eps);
    rstd[n] = r;
    for (let c = 0; c < C; c++) out[n * C + c] = x[n * C + c] * r * weight[c];
  }
}

export function rmsnormBackwardRef(
  dx: FloatArray,
  dweight: FloatArray,
  dout: FloatArray,
  x: FloatArray,
  weight: FloatArray,
  rstd: FloatArray,
  N: number,
  C: number,
): void {
  for (let n = 0; n < N; n++) {
    const r = rstd[n];
    // y_c = x_c r w_c;  dL/dx_j = r w_j g_j - r^3/C x_j Σ_c g_c w_c x_c
    let dot = 0;
    for (let c = 0; c < C; c++) dot += dout[n * C + c] * weight[c] * x[n * C + c];
    const k = (r * r * r) / C;
    for (let c = 0; c < C; c++) {
      const g = dout[n * C + c];
      dweight[c] += g * x[n * C + c] * r;
      dx[n * C + c] += r * weight[c] * g - k * x[n * C + c] * dot;
    }
  }
}

export function softmaxForwardRef(out: FloatArray, x: FloatArray, N: number, C: number): void {
  for (let n = 0; n < N; n++) {
    let mx = -Infinity;
    for (let c = 0; c < C; c++) mx = Math.max(mx, x[n * C + c]);
    let sum = 0;
    for (let c = 0; c < C; c++) {
      const e = Math.exp(x[n * C + c] - mx);
      out[n * C + c] = e;
      sum += e;
    }
    for (let c = 0; c < C; c++) out[n * C + c] /= sum;
  }
}

export function logSoftmaxForwardRef(out: FloatArray, x: FloatArray, N: number, C: number): void {
  for (let n = 0; n < N; n++) {
    let mx = -Infinity;
    for (let c = 0; c < C; c++) mx = Math.max(mx, x[n * C + c]);
    let sum = 0;
    for (let c = 0; c < C; c++) sum += Math.exp(x[n * C + c] - mx);
    const lse = mx + Math.log(sum);
    for (let c = 0; c < C; c++) out[n * C + c] = x[n * C + c] - lse;
  }
}

export function softmaxBackwardRef(dx: FloatArray, dout: FloatArray, y: FloatArray, N: number, C: number): void {
  for (let n = 0; n < N; n++) {
    let dot = 0;
    for (let c = 0; c < C; c++) dot += dout[n * C + c] * y[n * C + c];
    for (let c = 0; c < C; c++) dx[n * C + c] += y[n * C + c] * (dout[n * C + c] - dot);
  }
}

export function logSoftmaxBackwardRef(dx: FloatArray, dout: FloatArray, y: FloatArray, N: number, C: number): void {
  for (let n = 0; n < N; n++) {
    let sum = 0;
    for (let c = 0; c < C; c++) sum += dout[n * C + c];
    for (let c = 0; c < C; c++) dx[n * C + c] += dout[n * C + c] - Math.exp(y[n * C + c]) * sum;
  }
}

/** Where each sequence of a packed attention batch lives: its first row, its first probability, and the totals. */
export interface AttentionLayout {
  rowOffset: number[];
  attOffset: number[];
  rows: number;
  attSize: number;
}

/** The layout of a packed attention batch (kernels/types.ts, attentionForward) of sequences of `lengths`. */
export function attentionLayout(lengths: readonly number[], NH: number): AttentionLayout {
  const rowOffset: number[] = [];
  const attOffset: number[] = [];
  let rows = 0;
  let attSize = 0;
  for (const T of lengths) {
    rowOffset.push(rows);
    attOffset.push(attSize);
    rows += T;
    attSize += NH * T * T;
  }
  return { rowOffset, attOffset, rows, attSize };
}

export function attentionForwardRef(
  out: FloatArray,
  att: FloatArray,
  q: FloatArray,
  k: FloatArray,
  v: FloatArray,
  lengths: readonly number[],
  C: number,
  NH: number,
): void {
  const hs = C / NH;
  const scale = 1 / Math.sqrt(hs);
  const { rowOffset, attOffset } = attentionLayout(lengths, NH);
  lengths.forEach((T, b) => {
    const r0 = rowOffset[b];
    for (let h = 0; h < NH; h++) {
      for (let t = 0; t < T; t++) {
        const row = attOffset[b] + (h * T + t) * T;
        const qo = (r0 + t) * C + h * hs;
        let mx = -Infinity;
        for (let s = 0; s <= t; s++) {
          const ko = (r0 + s) * C + h * hs;
          let d = 0;
          for (let i = 0; i < hs; i++) d += q[qo + i] * k[ko + i];
          d *= scale;
          att[row + s] = d;
          if (d > mx) mx = d;
        }
        let sum = 0;
        for (let s = 0; s <= t; s++) {
          const e = Math.exp(att[row + s] - mx);
          att[row + s] = e;
          sum += e;
        }
        for (let s = 0; s <= t; s++) att[row + s] /= sum;
        for (let s = t + 1; s < T; s++) att[row + s] = 0;
        for (let i = 0; i < hs; i++) {
          let acc = 0;
          for (let s = 0; s <= t; s++) acc += att[row + s] * v[(r0 + s) * C + h * hs + i];
          out[qo + i] = acc;
        }
      }
    }
  });
}

export function attentionBackwardRef(
  dq: FloatArray,
  dk: FloatArray,
  dv: FloatArray,
  dout: FloatArray,
  att: FloatArray,
  q: FloatArray,
  k: FloatArray,
  v: FloatArray,
  lengths: readonly number[],
  C: number,
  NH: number,
): void {
  const hs = C / NH;
  const { rowOffset, attOffset, rows } = attentionLayout(lengths, NH);
  dq.fill(0, 0, rows * C);
  dk.fill(0, 0, rows * C);
  dv.fill(0, 0, rows * C);
  const scale = 1 / Math.sqrt(hs);
  lengths.forEach((T, b) => {
    const r0 = rowOffset[b];
    const datt = new Float64Array(T);
    for (let h = 0; h < NH; h++) {
      for (let t = 0; t < T; t++) {
        const row = attOffset[b] + (h * T + t) * T;
        const qo = (r0 + t) * C + h * hs;
        // out_t = Σ_s att[t,s] v_s
        let dot = 0;
        for (let s = 0; s <= t; s++) {
          const vo = (r0 + s) * C + h * hs;
          let d = 0;
          for (let i = 0; i < hs; i++) {
            d += dout[qo + i] * v[vo + i];
            dv[vo + i] += att[row + s] * dout[qo + i];
          }
          datt[s] = d;
          dot += d * att[row + s];
        }
        for (let s = 0; s <= t; s++) {
          const dpre = att[row + s] * (datt[s] - dot) * scale;
          const ko = (r0 + s) * C + h * hs;
          for (let i = 0; i < hs; i++) {
            dq[qo + i] += dpre * k[ko + i];
            dk[ko + i] += dpre * q[qo + i];
          }
        }
      }
    }
  });
}

/**
 * Causal attention over a packed forest (types.ts, treeAttentionForward): each row attends to its
 * ancestors and itself (kernels/tree.ts), probabilities stored per head, float64 accumulation.
 */
export function treeAttentionForwardRef(
  out: FloatArray,
  att: FloatArray,
  q: FloatArray,
  k: FloatArray,
  v: FloatArray,
  layout: Int32Array,
  C: number,
  NH: number,
): void {
  const hs = C / NH;
  const scale = 1 / Math.sqrt(hs);
  const visible = treeVisible(layout);
  for (let s = 0; s < layout[0]; s++) {
    const g = treeSegment(layout, s);
    const keys = segmentKeys(g);
    for (let h = 0; h < NH; h++) {
      for (let t = 0; t < g.len; t++) {
        const n = g.A + t + 1;
        const row = h * visible + g.visOffset + t * g.A + (t * (t + 1)) / 2;
        const qo = (g.start + t) * C + h * hs;
        let mx = -Infinity;
        for (let m = 0; m < n; m++) {
          const ko = keys[m] * C + h * hs;
          let d = 0;
          for (let i = 0; i < hs; i++) d += q[qo + i] * k[ko + i];
          att[row + m] = d * scale;
          if (att[row + m] > mx) mx = att[row + m];
        }
        let sum = 0;
        for (let m = 0; m < n; m++) sum += att[row + m] = Math.exp(att[row + m] - mx);
        for (let m = 0; m < n; m++) att[row + m] /= sum;
        for (let i = 0; i < hs; i++) {
          let acc = 0;
          for (let m = 0; m < n; m++) acc += att[row + m] * v[keys[m] * C + h * hs + i];
          out[qo + i] = acc;
        }
      }
    }
  }
}

/** Writes dq, dk, dv [N, C] of treeAttentionForwardRef given dout and its probabilities. */
export function treeAttentionBackwardRef(
  dq: FloatArray,
  dk: FloatArray,
  dv: FloatArray,
  dout: FloatArray,
  att: FloatArray,
  q: FloatArray,
  k: FloatArray,
  v: FloatArray,
  layout: Int32Array,
  C: number,
  NH: number,
): void {
  const hs = C / NH;
  const scale = 1 / Math.sqrt(hs);
  const rows = treeRows(layout);
  const visible = treeVisible(layout);
  dq.fill(0, 0, rows * C);
  dk.fill(0, 0, rows * C);
  dv.fill(0, 0, rows * C);
  for (let s = 0; s < layout[0]; s++) {
    const g = treeSegment(layout, s);
    const keys = segmentKeys(g);
    const dp = new Float64Array(keys.length);
    for (let h = 0; h < NH; h++) {
      for (let t = 0; t < g.len; t++) {
        const n = g.A + t + 1;
        const row = h * visible + g.visOffset + t * g.A + (t * (t + 1)) / 2;
        const qo = (g.start + t) * C + h * hs;
        let dot = 0;
        for (let m = 0; m < n; m++) {
          const vo = keys[m] * C + h * hs;
          let d = 0;
          for (let i = 0; i < hs; i++) {
            d += dout[qo + i] * v[vo + i];
            dv[vo + i] += att[row + m] * dout[qo + i];
          }
          dp[m] = d;
          dot += d * att[row + m];
        }
        for (let m = 0; m < n; m++) {
          const ds = att[row + m] * (dp[m] - dot) * scale;
          const ko = keys[m] * C + h * hs;
          for (let i = 0; i < hs; i++) {
            dq[qo + i] += ds * k[ko + i];
            dk[ko + i] += ds * q[qo + i];
          }
        }
      }
    }
  }
}

/**
 * Decode attention with grouped-query heads (types.ts, decodeAttention): q, out [NH·hd]; k, v
 * [T, NKV·hd]; query head h reads key/value head ⌊h / (NH/NKV)⌋. Float64 accumulation throughout.
 */
export function decodeAttentionRef(
  out: FloatArray,
  q: FloatArray,
  k: FloatArray,
  v: FloatArray,
  T: number,
  NH: number,
  NKV: number,
  hd: number,
): void {
  const group = NH / NKV;
  const ld = NKV * hd;
  const scale = 1 / Math.sqrt(hd);
  const p = new Float64Array(T);
  for (let h = 0; h < NH; h++) {
    const kv = Math.floor(h / group) * hd;
    let mx = -Infinity;
    for (let s = 0; s < T; s++) {
      let d = 0;
      for (let i = 0; i < hd; i++) d += q[h * hd + i] * k[s * ld + kv + i];
      p[s] = d * scale;
      mx = Math.max(mx, p[s]);
    }
    let sum = 0;
    for (let s = 0; s < T; s++) sum += p[s] = Math.exp(p[s] - mx);
    for (let i = 0; i < hd; i++) {
      let acc = 0;
      for (let s = 0; s < T; s++) acc += p[s] * v[s * ld + kv + i];
      out[h * hd + i] = acc / sum;
    }
  }
}

/**
 * Paged decode attention (types.ts, pagedDecodeAttention): each row r is decodeAttentionRef over its
 * lengths[r] positions, gathered from its pages (row s mod P of layer `layer` of page pages[r·W + ⌊s/P⌋]).
 */
export function pagedDecodeAttentionRef(
  out: FloatArray,
  q: FloatArray,
  kPages: readonly FloatArray[],
  vPages: readonly FloatArray[],
  pages: Int32Array,
  W: number,
  lengths: Int32Array,
  R: number,
  layer: number,
  P: number,
  NH: number,
  NKV: number,
  hd: number,
): void {
  const C = NKV * hd;
  const Cq = NH * hd;
  for (let r = 0; r < R; r++) {
    const T = lengths[r];
    const k = new Float64Array(T * C);
    const v = new Float64Array(T * C);
    for (let s = 0; s < T; s++) {
      const page = pages[r * W + Math.floor(s / P)];
      const at = (layer * P + (s % P)) * C;
      k.set(kPages[page].subarray(at, at + C), s * C);
      v.set(vPages[page].subarray(at, at + C), s * C);
    }
    decodeAttentionRef(out.subarray(r * Cq, (r + 1) * Cq), q.subarray(r * Cq, (r + 1) * Cq), k, v, T, NH, NKV, hd);
  }
}

/**
 * Sampling statistics (types.ts, samplingStats) in float64: per row, z = x·invT[n], out = exp(z − max z),
 * stats = [logsumexp z, −Σ p·log p, Σ out].
 */
export function samplingStatsRef(
  out: FloatArray,
  stats: Float64Array,
  x: FloatArray,
  invT: FloatArray,
  N: number,
  V: number,
): void {
  for (let n = 0; n < N; n++) {
    const row = n * V;
    let mx = -Infinity;
    for (let v = 0; v < V; v++) mx = Math.max(mx, x[row + v] * invT[n]);
    let S = 0;
    let W = 0;
    for (let v = 0; v < V; v++) {
      const d = x[row + v] * invT[n] - mx;
      const e = Math.exp(d);
      out[row + v] = e;
      S += e;
      W += d > -Infinity ? e * d : 0;
    }
    stats[n * 3] = mx + Math.log(S);
    stats[n * 3 + 1] = Math.log(S) - W / S;
    stats[n * 3 + 2] = S;
  }
}

export function ropeRef(
  x: FloatArray,
  positions: Int32Array,
  N: number,
  C: number,
  NH: number,
  cos: FloatArray,
  sin: FloatArray,
  inverse: boolean,
): void {
  const hs = C / NH;
  const half = hs / 2;
  for (let n = 0; n < N; n++) {
    const t = positions[n] * half;
    for (let h = 0; h < NH; h++) {
      const o = n * C + h * hs;
      for (let i = 0; i < half; i++) {
        const c = cos[t + i];
        const s = inverse ? -sin[t + i] : sin[t + i];
        const a = x[o + i];
        const b = x[o + i + half];
        x[o + i] = a * c - b * s;
        x[o + i + half] = a * s + b * c;
      }
    }
  }
}

export function swigluForwardRef(out: FloatArray, gate: FloatArray, up: FloatArray, n: number): void {
  for (let i = 0; i < n; i++) {
    const g = gate[i];
    out[i] = (g / (1 + Math.exp(-g))) * up[i];
  }
}

export function swigluBackwardRef(
  dgate: FloatArray,
  dup: FloatArray,
  dout: FloatArray,
  gate: FloatArray,
  up: FloatArray,
  n: number,
): void {
  for (let i = 0; i < n; i++) {
    const g = gate[i];
    const sig = 1 / (1 + Math.exp(-g));
    dup[i] = dout[i] * g * sig;
    dgate[i] = dout[i] * up[i] * sig * (1 + g * (1 - sig));
  }
}

export function logitGradRef(
  dlogits: FloatArray,
  entropy: FloatArray,
  lsm: FloatArray,
  coef: FloatArray,
  bonus: FloatArray,
  targets: Int32Array,
  N: number,
  V: number,
): void {
  for (let n = 0; n < N; n++) {
    const row = n * V;
    let H = 0;
    for (let v = 0; v < V; v++) H -= Math.exp(lsm[row + v]) * lsm[row + v];
    entropy[n] = H;
    const c = coef[n];
    const b = bonus[n];
    for (let v = 0; v < V; v++) dlogits[row + v] = Math.exp(lsm[row + v]) * (b * (lsm[row + v] + H) - c);
    dlogits[row + targets[n]] += c;
  }
}

export function adamwRef(x: FloatArray, g: FloatArray, m: FloatArray, v: FloatArray, n: number, h: AdamWStep): void {
  for (let i = 0; i < n; i++) {
    const gi = g[i] * h.gradScale;
    const mi = (m[i] = h.beta1 * m[i] + (1 - h.beta1) * gi);
    const vi = (v[i] = h.beta2 * v[i] + (1 - h.beta2) * gi * gi);
    x[i] -= h.lr * (mi / h.bc1 / (Math.sqrt(vi / h.bc2) + h.eps) + h.weightDecay * x[i]);
  }
}

function referenceBackend<F extends FloatArray>(name: string, alloc: (n: number) => F): Kernels<F> {
  return {
    name,
    alloc,
    matmul: matmulRef,
    matmulBT: matmulBTRef,
    matmulAT: matmulATRef,
    rmsnormForward: rmsnormForwardRef,
    rmsnormBackward: rmsnormBackwardRef,
    softmaxForward: softmaxForwardRef,
    logSoftmaxForward: logSoftmaxForwardRef,
    softmaxBackward: softmaxBackwardRef,
    logSoftmaxBackward: logSoftmaxBackwardRef,
    rope: ropeRef,
    swigluForward: swigluForwardRef,
    swigluBackward: swigluBackwardRef,
    attentionForward: attentionForwardRef,
    attentionBackward: attentionBackwardRef,
    treeAttentionForward: treeAttentionForwardRef,
    treeAttentionBackward: treeAttentionBackwardRef,
    logitGrad: logitGradRef,
    adamw: adamwRef,
  };
}

/** The float32 reference backend (the fallback when WASM SIMD is unavailable). */
export const referenceKernels: Kernels = referenceBackend('reference', (n) => new Float32Array(n));

/**
 * The same kernels over Float64Array buffers: every activation, gradient and parameter arena is
 * float64, so finite-difference gradient checks can use tight tolerances. Not a training backend.
 */
export const referenceKernels64: Kernels<Float64Array> = referenceBackend('reference-f64', (n) => new Float64Array(n));

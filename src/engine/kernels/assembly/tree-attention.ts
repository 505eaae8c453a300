// Causal multi-head attention over a packed forest (AssemblyScript): every row attends to its
// ancestors and itself, whose key ranges the layout lists (kernels/tree.ts for its encoding). Work
// items are heads: a head writes only its own columns of out/dq/dk/dv and its own probabilities, so
// threads run disjoint head ranges and the result does not depend on the thread count. Four keys at a
// time through dot4/axpy4 (attention.ts), the rest one by one.

import { dot, axpy, dot4, axpy4 } from './attention';
import { exps } from './expv';
import { zeroFloats } from './matmul';

const HEADER: i32 = 3;
const SEG: i32 = 5;

/** Scratch bytes treeAttentionBackward needs per thread: four floats per key of the deepest row (+16). */
export function treeAttentionScratchBytes(maxKeys: i32): i32 {
  return maxKeys * 16 + 16;
}

/** Probabilities of 4 rows at key m: lane r is row r's (0 past a row's own position: m ≥ n0 + r). */
// @ts-ignore: decorator
@inline
function probs4(P0: usize, P1: usize, P2: usize, P3: usize, m: i32, n0: i32): v128 {
  const o = <usize>m << 2;
  let p = f32x4.splat(0);
  p = f32x4.replace_lane(p, 0, m < n0 ? load<f32>(P0 + o) : 0);
  p = f32x4.replace_lane(p, 1, m < n0 + 1 ? load<f32>(P1 + o) : 0);
  p = f32x4.replace_lane(p, 2, m < n0 + 2 ? load<f32>(P2 + o) : 0);
  p = f32x4.replace_lane(p, 3, m < n0 + 3 ? load<f32>(P3 + o) : 0);
  return p;
}

/** Row r's probabilities start at P0 + offset of row t0 + r (rows of a segment: A + t + 1 each). */
// @ts-ignore: decorator
@inline
function rowProbs(att: usize, h: i32, visible: i32, visOff: i32, A: i32, t: i32): usize {
  return att + (<usize>h * <usize>visible + <usize>(visOff + t * A + (t * (t + 1)) / 2)) * 4;
}

// @ts-ignore: decorator
@inline
function rangeFrom(layout: usize, chainAt: i32, c: i32, pairs: i32, start: i32): i32 {
  return c < pairs ? load<i32>(layout + (<usize>(chainAt + 2 * c) << 2)) : start;
}

// @ts-ignore: decorator
@inline
function rangeTo(layout: usize, chainAt: i32, c: i32, pairs: i32, last: i32): i32 {
  return c < pairs ? load<i32>(layout + (<usize>(chainAt + 2 * c + 1) << 2)) : last + 1;
}

/** Softmax in place over row P's n scores (scaled already), whose maximum is mx. */
function softmaxRow(P: usize, n: i32, mx: f32): void {
  let sum: f32 = 0;
  for (let e = 0; e < n; e++) {
    const p = P + (<usize>e << 2);
    const x = exps(load<f32>(p) - mx);
    store<f32>(p, x);
    sum += x;
  }
  const inv: f32 = <f32>1 / sum;
  for (let e = 0; e < n; e++) {
    const p = P + (<usize>e << 2);
    store<f32>(p, load<f32>(p) * inv);
  }
}

/** out_i = Σ_m P_m·v_{key m} over row i's keys (the chain's ranges, then start..i), four keys at a time. */
function rowOutput(oi: usize, P: usize, vh: usize, stride: usize, hs: i32, layout: usize, chainAt: i32, pairs: i32,
  start: i32, i: i32): void {
  zeroFloats(oi, hs);
  let m = 0;
  for (let c = 0; c <= pairs; c++) {
    const to = rangeTo(layout, chainAt, c, pairs, i);
    let j = rangeFrom(layout, chainAt, c, pairs, start);
    for (; j + 4 <= to; j += 4) {
      axpy4(oi, v128.load(P + (<usize>m << 2)), vh + <usize>j * stride, stride, hs);
      m += 4;
    }
    for (; j < to; j++) {
      axpy(oi, load<f32>(P + (<usize>m << 2)), vh + <usize>j * stride, hs);
      m++;
    }
  }
}

/** Heads h0..h1: P = softmax(q·kᵀ/√hs) over each row's keys into att, out = P·v (four keys at a time). */
export function treeAttentionForward(
  out: usize, att: usize, q: usize, k: usize, v: usize, layout: usize, h0: i32, h1: i32, C: i32, NH: i32,
): void {
  const hs = C / NH;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hs));
  const sc = f32x4.splat(scale);
  const S = load<i32>(layout);
  const visible = load<i32>(layout, 4);
  const stride = <usize>C << 2;
  for (let h = h0; h < h1; h++) {
    const ho = <usize>(h * hs) << 2;
    const kh = k + ho;
    const vh = v + ho;
    for (let s = 0; s < S; s++) {
      const r = layout + (<usize>(HEADER + s * SEG) << 2);
      const start = load<i32>(r);
      const len = load<i32>(r, 4);
      const visOff = load<i32>(r, 8);
      const chainAt = load<i32>(r, 12);
      const pairs = load<i32>(r, 16);
      let A = 0;
      for (let c = 0; c < pairs; c++) A += rangeTo(layout, chainAt, c, pairs, 0) - rangeFrom(layout, chainAt, c, pairs, 0);
      for (let t = 0; t < len; t++) {
        const i = start + t;
        const P = rowProbs(att, h, visible, visOff, A, t);
        const qi = q + <usize>i * stride + ho;
        let m = 0;
        let mx: f32 = -Infinity;
        for (let c = 0; c <= pairs; c++) {
          const to = rangeTo(layout, chainAt, c, pairs, i);
          let j = rangeFrom(layout, chainAt, c, pairs, start);
          for (; j + 4 <= to; j += 4) {
            const s4 = f32x4.mul(dot4(qi, kh + <usize>j * stride, stride, hs), sc);
            v128.store(P + (<usize>m << 2), s4);
            mx = max(max(mx, max(f32x4.extract_lane(s4, 0), f32x4.extract_lane(s4, 1))),
              max(f32x4.extract_lane(s4, 2), f32x4.extract_lane(s4, 3)));
            m += 4;
          }
          for (; j < to; j++) {
            const x = dot(qi, kh + <usize>j * stride, hs) * scale;
            store<f32>(P + (<usize>m << 2), x);
            mx = max(mx, x);
            m++;
          }
        }
        softmaxRow(P, m, mx);
        rowOutput(out + <usize>i * stride + ho, P, vh, stride, hs, layout, chainAt, pairs, start, i);
      }
    }
  }
}

/** 4×4 transpose: lane r of vector k → lane k of vector r. */
// @ts-ignore: decorator
@inline
function row4(d0: v128, d1: v128, d2: v128, d3: v128, r: i32): v128 {
  const lo = r < 2;
  const a = lo ? v128.shuffle<f32>(d0, d1, 0, 4, 1, 5) : v128.shuffle<f32>(d0, d1, 2, 6, 3, 7);
  const b = lo ? v128.shuffle<f32>(d2, d3, 0, 4, 1, 5) : v128.shuffle<f32>(d2, d3, 2, 6, 3, 7);
  return (r & 1) == 0 ? v128.shuffle<f32>(a, b, 0, 1, 4, 5) : v128.shuffle<f32>(a, b, 2, 3, 6, 7);
}

/** One row's backward (the rows a segment has past its blocks of four): dv, dk of its keys, dq of the row. */
// @ts-ignore: decorator
@inline
function backwardRow(
  dq: usize, dkh: usize, dvh: usize, dout: usize, att: usize, qh: usize, kh: usize, vh: usize, layout: usize, h: i32,
  visible: i32, visOff: i32, A: i32, start: i32, t: i32, chainAt: i32, pairs: i32, stride: usize, ho: usize, hs: i32,
  scale: f32, scratch: usize,
): void {
  const i = start + t;
  const P = rowProbs(att, h, visible, visOff, A, t);
  const doi = dout + <usize>i * stride + ho;
  const qi = qh + <usize>i * stride;
  const dqi = dq + <usize>i * stride + ho;
  // dP_j = dO_i·v_j; dv_j += P_ij·dO_i; rowdot = Σ_j P_ij·dP_j
  let m = 0;
  let rowdot: f32 = 0;
  for (let c = 0; c <= pairs; c++) {
    const to = rangeTo(layout, chainAt, c, pairs, i);
    for (let j = rangeFrom(layout, chainAt, c, pairs, start); j < to; j++) {
      const d = dot(doi, vh + <usize>j * stride, hs);
      store<f32>(scratch + (<usize>m << 2), d);
      const p = load<f32>(P + (<usize>m << 2));
      rowdot += p * d;
      axpy(dvh + <usize>j * stride, p, doi, hs);
      m++;
    }
  }
  // dS_j = P_ij·(dP_j − rowdot)/√hs; dq_i += dS_j·k_j; dk_j += dS_j·q_i
  m = 0;
  for (let c = 0; c <= pairs; c++) {
    const to = rangeTo(layout, chainAt, c, pairs, i);
    for (let j = rangeFrom(layout, chainAt, c, pairs, start); j < to; j++) {
      const mo = <usize>m << 2;
      const ds = load<f32>(P + mo) * (load<f32>(scratch + mo) - rowdot) * scale;
      axpy(dqi, ds, kh + <usize>j * stride, hs);
      axpy(dkh + <usize>j * stride, ds, qi, hs);
      m++;
    }
  }
}

/**
 * Heads h0..h1 of the backward: writes dq, dk, dv (their columns of rows 0..N−1 are zeroed first) from
 * dout and att: dP = dO·vᵀ, dv += Pᵀ·dO, dS = P ⊙ (dP − rowsum(P ⊙ dP))/√hs, dq += dS·k, dk += dSᵀ·q.
 * Rows go four at a time (each key's dk/dv updated once for the four, dq by tiles of four keys), the
 * last rows of a segment one by one. `scratch` holds treeAttentionScratchBytes(deepest row's keys).
 */
export function treeAttentionBackward(
  dq: usize, dk: usize, dv: usize, dout: usize, att: usize, q: usize, k: usize, v: usize, layout: usize, h0: i32,
  h1: i32, C: i32, NH: i32, scratch: usize,
): void {
  const hs = C / NH;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hs));
  const sc = f32x4.splat(scale);
  const S = load<i32>(layout);
  const visible = load<i32>(layout, 4);
  const N = load<i32>(layout, 8);
  const stride = <usize>C << 2;
  for (let h = h0; h < h1; h++) {
    const ho = <usize>(h * hs) << 2;
    for (let n = 0; n < N; n++) {
      const o = <usize>n * stride + ho;
      zeroFloats(dq + o, hs);
      zeroFloats(dk + o, hs);
      zeroFloats(dv + o, hs);
    }
    const kh = k + ho;
    const vh = v + ho;
    const qh = q + ho;
    const dkh = dk + ho;
    const dvh = dv + ho;
    for (let s = 0; s < S; s++) {
      const r = layout + (<usize>(HEADER + s * SEG) << 2);
      const start = load<i32>(r);
      const len = load<i32>(r, 4);
      const visOff = load<i32>(r, 8);
      const chainAt = load<i32>(r, 12);
      const pairs = load<i32>(r, 16);
      let A = 0;
      for (let c = 0; c < pairs; c++) A += rangeTo(layout, chainAt, c, pairs, 0) - rangeFrom(layout, chainAt, c, pairs, 0);
      let t = 0;
      for (; t + 4 <= len; t += 4) {
        const i = start + t;
        const P0 = rowProbs(att, h, visible, visOff, A, t);
        const P1 = rowProbs(att, h, visible, visOff, A, t + 1);
        const P2 = rowProbs(att, h, visible, visOff, A, t + 2);
        const P3 = rowProbs(att, h, visible, visOff, A, t + 3);
        const n0 = A + t + 1;
        const do0 = dout + <usize>i * stride + ho;
        const q0 = qh + <usize>i * stride;
        const dq0 = dq + <usize>i * stride + ho;
        // pass 1, per key: dP for the four rows (kept as [key][row]); dv_j += Σ_r P_rj·dO_r; rowdot_r += P_rj·dP_rj
        let rowdot = f32x4.splat(0);
        let m = 0;
        for (let c = 0; c <= pairs; c++) {
          const to = rangeTo(layout, chainAt, c, pairs, i + 3);
          for (let j = rangeFrom(layout, chainAt, c, pairs, start); j < to; j++) {
            const d4 = dot4(vh + <usize>j * stride, do0, stride, hs);
            v128.store(scratch + (<usize>m << 4), d4);
            const p4 = probs4(P0, P1, P2, P3, m, n0);
            rowdot = f32x4.add(rowdot, f32x4.mul(p4, d4));
            axpy4(dvh + <usize>j * stride, p4, do0, stride, hs);
            m++;
          }
        }
        // pass 2: dS_rj = P_rj·(dP_rj − rowdot_r)/√hs; dk_j += Σ_r dS_rj·q_r; dq_r += Σ_j dS_rj·k_j (tiles of 4 keys)
        m = 0;
        for (let c = 0; c <= pairs; c++) {
          const to = rangeTo(layout, chainAt, c, pairs, i + 3);
          let j = rangeFrom(layout, chainAt, c, pairs, start);
          for (; j + 4 <= to; j += 4) {
            const e0 = f32x4.mul(f32x4.mul(probs4(P0, P1, P2, P3, m, n0), f32x4.sub(v128.load(scratch + (<usize>m << 4)), rowdot)), sc);
            const e1 = f32x4.mul(f32x4.mul(probs4(P0, P1, P2, P3, m + 1, n0), f32x4.sub(v128.load(scratch + (<usize>(m + 1) << 4)), rowdot)), sc);
            const e2 = f32x4.mul(f32x4.mul(probs4(P0, P1, P2, P3, m + 2, n0), f32x4.sub(v128.load(scratch + (<usize>(m + 2) << 4)), rowdot)), sc);
            const e3 = f32x4.mul(f32x4.mul(probs4(P0, P1, P2, P3, m + 3, n0), f32x4.sub(v128.load(scratch + (<usize>(m + 3) << 4)), rowdot)), sc);
            const kj = kh + <usize>j * stride;
            axpy4(dkh + <usize>j * stride, e0, q0, stride, hs);
            axpy4(dkh + <usize>(j + 1) * stride, e1, q0, stride, hs);
            axpy4(dkh + <usize>(j + 2) * stride, e2, q0, stride, hs);
            axpy4(dkh + <usize>(j + 3) * stride, e3, q0, stride, hs);
            axpy4(dq0, row4(e0, e1, e2, e3, 0), kj, stride, hs);
            axpy4(dq0 + stride, row4(e0, e1, e2, e3, 1), kj, stride, hs);
            axpy4(dq0 + stride * 2, row4(e0, e1, e2, e3, 2), kj, stride, hs);
            axpy4(dq0 + stride * 3, row4(e0, e1, e2, e3, 3), kj, stride, hs);
            m += 4;
          }
          for (; j < to; j++) {
            const e = f32x4.mul(f32x4.mul(probs4(P0, P1, P2, P3, m, n0), f32x4.sub(v128.load(scratch + (<usize>m << 4)), rowdot)), sc);
            const kj = kh + <usize>j * stride;
            axpy4(dkh + <usize>j * stride, e, q0, stride, hs);
            axpy(dq0, f32x4.extract_lane(e, 0), kj, hs);
            axpy(dq0 + stride, f32x4.extract_lane(e, 1), kj, hs);
            axpy(dq0 + stride * 2, f32x4.extract_lane(e, 2), kj, hs);
            axpy(dq0 + stride * 3, f32x4.extract_lane(e, 3), kj, hs);
            m++;
          }
        }
      }
      for (; t < len; t++)
        backwardRow(dq, dkh, dvh, dout, att, qh, kh, vh, layout, h, visible, visOff, A, start, t, chainAt, pairs, stride, ho, hs, scale, scratch);
    }
  }
}

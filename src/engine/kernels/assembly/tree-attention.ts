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

/** Scratch bytes treeAttentionBackward needs per thread: one float per key of the deepest row (+16). */
export function treeAttentionScratchBytes(maxKeys: i32): i32 {
  return ((maxKeys * 4 + 15) / 16) * 16 + 16;
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

/** Heads h0..h1: P = softmax(q·kᵀ/√hs) over each row's keys into att, out = P·v. */
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
        const P = att + (<usize>h * <usize>visible + <usize>(visOff + t * A + (t * (t + 1)) / 2)) * 4;
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
        let sum: f32 = 0;
        for (let e = 0; e < m; e++) {
          const p = P + (<usize>e << 2);
          const x = exps(load<f32>(p) - mx);
          store<f32>(p, x);
          sum += x;
        }
        const inv: f32 = <f32>1 / sum;
        for (let e = 0; e < m; e++) {
          const p = P + (<usize>e << 2);
          store<f32>(p, load<f32>(p) * inv);
        }
        const oi = out + <usize>i * stride + ho;
        zeroFloats(oi, hs);
        m = 0;
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
    }
  }
}

/**
 * Heads h0..h1 of the backward: writes dq, dk, dv (their columns of rows 0..N−1 are zeroed first) from
 * dout and att: dP = dO·vᵀ, dv += Pᵀ·dO, dS = P ⊙ (dP − rowsum(P ⊙ dP))/√hs, dq += dS·k, dk += dSᵀ·q.
 * `scratch` holds treeAttentionScratchBytes(deepest row's keys).
 */
export function treeAttentionBackward(
  dq: usize, dk: usize, dv: usize, dout: usize, att: usize, q: usize, k: usize, v: usize, layout: usize, h0: i32,
  h1: i32, C: i32, NH: i32, scratch: usize,
): void {
  const hs = C / NH;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hs));
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
      for (let t = 0; t < len; t++) {
        const i = start + t;
        const P = att + (<usize>h * <usize>visible + <usize>(visOff + t * A + (t * (t + 1)) / 2)) * 4;
        const doi = dout + <usize>i * stride + ho;
        const qi = qh + <usize>i * stride;
        const dqi = dq + <usize>i * stride + ho;
        // dP_j = dO_i·v_j; dv_j += P_ij·dO_i; rowdot = Σ_j P_ij·dP_j
        let m = 0;
        let rowdot: f32 = 0;
        for (let c = 0; c <= pairs; c++) {
          const to = rangeTo(layout, chainAt, c, pairs, i);
          let j = rangeFrom(layout, chainAt, c, pairs, start);
          for (; j + 4 <= to; j += 4) {
            const d4 = dot4(doi, vh + <usize>j * stride, stride, hs);
            v128.store(scratch + (<usize>m << 2), d4);
            const p4 = v128.load(P + (<usize>m << 2));
            const pd = f32x4.mul(p4, d4);
            rowdot += f32x4.extract_lane(pd, 0) + f32x4.extract_lane(pd, 1) + f32x4.extract_lane(pd, 2)
              + f32x4.extract_lane(pd, 3);
            for (let e = 0; e < 4; e++) {
              axpy(dvh + <usize>(j + e) * stride, load<f32>(P + (<usize>(m + e) << 2)), doi, hs);
            }
            m += 4;
          }
          for (; j < to; j++) {
            const d = dot(doi, vh + <usize>j * stride, hs);
            store<f32>(scratch + (<usize>m << 2), d);
            const p = load<f32>(P + (<usize>m << 2));
            rowdot += p * d;
            axpy(dvh + <usize>j * stride, p, doi, hs);
            m++;
          }
        }
        // dS_j = P_ij·(dP_j − rowdot)/√hs; dq_i += dS_j·k_j; dk_j += dS_j·q_i
        const rd = f32x4.splat(rowdot);
        const sc = f32x4.splat(scale);
        m = 0;
        for (let c = 0; c <= pairs; c++) {
          const to = rangeTo(layout, chainAt, c, pairs, i);
          let j = rangeFrom(layout, chainAt, c, pairs, start);
          for (; j + 4 <= to; j += 4) {
            const mo = <usize>m << 2;
            const ds4 = f32x4.mul(f32x4.mul(v128.load(P + mo), f32x4.sub(v128.load(scratch + mo), rd)), sc);
            axpy4(dqi, ds4, kh + <usize>j * stride, stride, hs);
            for (let e = 0; e < 4; e++) {
              const ds: f32 = e == 0 ? f32x4.extract_lane(ds4, 0) : e == 1 ? f32x4.extract_lane(ds4, 1)
                : e == 2 ? f32x4.extract_lane(ds4, 2) : f32x4.extract_lane(ds4, 3);
              axpy(dkh + <usize>(j + e) * stride, ds, qi, hs);
            }
            m += 4;
          }
          for (; j < to; j++) {
            const mo = <usize>m << 2;
            const ds = load<f32>(P + mo) * (load<f32>(scratch + mo) - rowdot) * scale;
            axpy(dqi, ds, kh + <usize>j * stride, hs);
            axpy(dkh + <usize>j * stride, ds, qi, hs);
            m++;
          }
        }
      }
    }
  }
}

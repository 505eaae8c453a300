// Causal multi-head attention forward/backward (AssemblyScript). Training-time attention runs through
// the GEMM micro-kernel (matmul.ts) per (sequence, head); incremental decoding uses dot/axpy over the
// head dimension, with grouped-query attention (several query heads per cached key/value head).
// Layout as in kernels/types.ts: q,k,v,out [B,T,C] with heads interleaved (C = NH·hs), att [B,NH,T,T].
// Head dimension loops use f32x4 for the first hs&~3 lanes and scalars for the rest.

import { madd } from './madd';
import { expv, exps } from './expv';
import { gemmCore, zeroFloats, CAUSAL_N, CAUSAL_K_LOWER, CAUSAL_K_UPPER, KC, MR, NR } from './matmul';

// @ts-ignore: decorator
@inline
function dot(a: usize, b: usize, n: i32): f32 {
  let acc = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) acc = madd(v128.load(a + (<usize>i << 2)), v128.load(b + (<usize>i << 2)), acc);
  let s = f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1)
    + f32x4.extract_lane(acc, 2) + f32x4.extract_lane(acc, 3);
  for (; i < n; i++) s += load<f32>(a + (<usize>i << 2)) * load<f32>(b + (<usize>i << 2));
  return s;
}

/** y[0..n) += alpha * x[0..n) */
// @ts-ignore: decorator
@inline
function axpy(y: usize, alpha: f32, x: usize, n: i32): void {
  const av = f32x4.splat(alpha);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const p = y + (<usize>i << 2);
    v128.store(p, madd(av, v128.load(x + (<usize>i << 2)), v128.load(p)));
  }
  for (; i < n; i++) {
    const p = y + (<usize>i << 2);
    store<f32>(p, load<f32>(p) + alpha * load<f32>(x + (<usize>i << 2)));
  }
}

/** Bytes of scratch attentionForward/attentionBackward need for sequences of T and heads of hs. */
export function attentionScratchBytes(T: i32, hs: i32): i32 {
  return packBBytes(T, hs) + PACK_A_BYTES + T * T * 4;
}

const PACK_A_BYTES: i32 = (KC * MR + MR * NR) * 4;

// @ts-ignore: decorator
@inline
function packBBytes(T: i32, hs: i32): i32 {
  // the largest packed B panel set: [min(hs, KC)][T rounded to NR] for scores, [min(T, KC)][hs rounded]
  // for products with V/K/Q
  const a = min(hs, KC) * (((T + NR - 1) / NR) * NR);
  const b = min(T, KC) * (((hs + NR - 1) / NR) * NR);
  return ((max(a, b) * 4 + 15) / 16) * 16;
}

/**
 * Row t of P holds scores for s ≤ t: P[t, s] = softmax_s(scale · P[t, s]); entries s > t become 0.
 */
function causalSoftmax(P: usize, T: i32, scale: f32): void {
  const sc = f32x4.splat(scale);
  for (let t = 0; t < T; t++) {
    const row = P + (<usize>(t * T) << 2);
    const n = t + 1;
    let mv = f32x4.splat(-Infinity);
    let s = 0;
    for (; s + 4 <= n; s += 4) mv = f32x4.pmax(mv, v128.load(row + (<usize>s << 2)));
    let mx = max(
      max(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)),
      max(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)),
    );
    for (; s < n; s++) mx = max(mx, load<f32>(row + (<usize>s << 2)));
    const shift: f32 = -mx * scale;
    const sh = f32x4.splat(shift);
    let sv = f32x4.splat(0);
    s = 0;
    for (; s + 4 <= n; s += 4) {
      const p = row + (<usize>s << 2);
      const e = expv(madd(v128.load(p), sc, sh));
      v128.store(p, e);
      sv = f32x4.add(sv, e);
    }
    let sum = f32x4.extract_lane(sv, 0) + f32x4.extract_lane(sv, 1)
      + f32x4.extract_lane(sv, 2) + f32x4.extract_lane(sv, 3);
    for (; s < n; s++) {
      const p = row + (<usize>s << 2);
      const e = exps(load<f32>(p) * scale + shift);
      store<f32>(p, e);
      sum += e;
    }
    const inv = f32x4.splat(<f32>1 / sum);
    s = 0;
    for (; s + 4 <= n; s += 4) {
      const p = row + (<usize>s << 2);
      v128.store(p, f32x4.mul(v128.load(p), inv));
    }
    for (; s < n; s++) {
      const p = row + (<usize>s << 2);
      store<f32>(p, load<f32>(p) * f32x4.extract_lane(inv, 0));
    }
    if (n < T) zeroFloats(row + (<usize>n << 2), T - n);
  }
}

/**
 * Items i0..i1 of a packed batch, item i = (sequence ⌊i/NH⌋, head i mod NH): `seqs` holds an i32
 * triple per sequence (row offset, attention-probability offset, length T). For each item:
 * S = Q_h·K_hᵀ (causal tiles only), P = softmax(S/√hs) into att, O_h = P·V_h, all through the GEMM
 * micro-kernel with strided operands (heads interleaved in [rows, C]). `scratch` holds
 * attentionScratchBytes(max T, hs). Threads may run disjoint item ranges over the same buffers (each
 * with its own scratch): an item writes only its own head's columns of its own sequence.
 */
export function attentionForward(
  out: usize, att: usize, q: usize, k: usize, v: usize, seqs: usize, i0: i32, i1: i32, C: i32, NH: i32, scratch: usize,
): void {
  eachHead(false, out, 0, 0, 0, att, q, k, v, seqs, i0, i1, C, NH, scratch);
}

/**
 * Writes dq, dk, dv for items i0..i1 (see attentionForward for items and `seqs`), given dout and att
 * (P) from forward: dP = dO·Vᵀ, dV = Pᵀ·dO, dS = P ⊙ (dP − rowsum(P ⊙ dP)) / √hs, dQ = dS·K,
 * dK = dSᵀ·Q. `scratch` holds attentionScratchBytes(max T, hs).
 */
export function attentionBackward(
  dq: usize, dk: usize, dv: usize, dout: usize, att: usize, q: usize, k: usize, v: usize, seqs: usize, i0: i32,
  i1: i32, C: i32, NH: i32, scratch: usize,
): void {
  eachHead(true, dq, dk, dv, dout, att, q, k, v, seqs, i0, i1, C, NH, scratch);
}

/** The (sequence, head) loop of both passes: forward writes `o` (out); backward writes o = dq, dk, dv from dout. */
function eachHead(
  backward: bool, o: usize, dk: usize, dv: usize, dout: usize, att: usize, q: usize, k: usize, v: usize, seqs: usize,
  i0: i32, i1: i32, C: i32, NH: i32, scratch: usize,
): void {
  const hs = C / NH;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hs));
  for (let item = i0; item < i1; item++) {
    const b = item / NH;
    const h = item - b * NH;
    const d = seqs + (<usize>(b * 3) << 2);
    const r0 = load<i32>(d);
    const T = load<i32>(d, 8);
    const packB = scratch;
    const packA = scratch + <usize>packBBytes(T, hs);
    const base = <usize>(r0 * C + h * hs) << 2;
    const P = att + (<usize>(load<i32>(d, 4) + h * T * T) << 2);
    if (backward) {
      const qb = q + base;
      const kb = k + base;
      const vb = v + base;
      headBackward(o + base, dk + base, dv + base, dout + base, P, qb, kb, vb, T, C, hs, scale, packB, packA);
    } else {
      gemmCore(T, T, hs, q + base, C, 1, k + base, 1, C, P, T, 0, packB, packA, CAUSAL_N);
      causalSoftmax(P, T, scale);
      gemmCore(T, hs, T, P, T, 1, v + base, C, 1, o + base, C, 0, packB, packA, CAUSAL_K_LOWER);
    }
  }
}

/** One (sequence, head) of attentionBackward; pointers are at the head's first column, rows C apart. */
function headBackward(
  dq: usize, dk: usize, dv: usize, dout: usize, P: usize, q: usize, k: usize, v: usize, T: i32, C: i32, hs: i32,
  scale: f32, packB: usize, packA: usize,
): void {
  const dP = packA + <usize>PACK_A_BYTES;
  gemmCore(T, T, hs, dout, C, 1, v, 1, C, dP, T, 0, packB, packA, CAUSAL_N);
  gemmCore(T, hs, T, P, 1, T, dout, C, 1, dv, C, 0, packB, packA, CAUSAL_K_UPPER);
  const sc = f32x4.splat(scale);
  for (let t = 0; t < T; t++) {
    const pr = P + (<usize>(t * T) << 2);
    const dr = dP + (<usize>(t * T) << 2);
    const n = t + 1;
    let dv4 = f32x4.splat(0);
    let s = 0;
    for (; s + 4 <= n; s += 4) dv4 = madd(v128.load(pr + (<usize>s << 2)), v128.load(dr + (<usize>s << 2)), dv4);
    let rowdot = f32x4.extract_lane(dv4, 0) + f32x4.extract_lane(dv4, 1)
      + f32x4.extract_lane(dv4, 2) + f32x4.extract_lane(dv4, 3);
    for (; s < n; s++) rowdot += load<f32>(pr + (<usize>s << 2)) * load<f32>(dr + (<usize>s << 2));
    const rd = f32x4.splat(rowdot);
    s = 0;
    for (; s + 4 <= n; s += 4) {
      const o = <usize>s << 2;
      v128.store(dr + o, f32x4.mul(f32x4.mul(v128.load(pr + o), f32x4.sub(v128.load(dr + o), rd)), sc));
    }
    for (; s < n; s++) {
      const o = <usize>s << 2;
      store<f32>(dr + o, load<f32>(pr + o) * (load<f32>(dr + o) - rowdot) * scale);
    }
    if (n < T) zeroFloats(dr + (<usize>n << 2), T - n);
  }
  gemmCore(T, hs, T, dP, T, 1, k, C, 1, dq, C, 0, packB, packA, CAUSAL_K_LOWER);
  gemmCore(T, hs, T, dP, 1, T, q, C, 1, dk, C, 0, packB, packA, CAUSAL_K_UPPER);
}

/**
 * One query row attending over T contiguous cached positions (incremental decoding) with grouped-query
 * attention: q, out [NH·hd]; k, v [T, NKV·hd]; query head h reads kv head ⌊h / (NH/NKV)⌋ (NKV divides
 * NH; NKV = NH is plain multi-head attention). Writes the heads h0..h1 of out, so threads may run
 * disjoint head ranges, each with its own `scores` (T floats). The math of attentionForward's last
 * row, summed in another order with Mathf.exp (sampler and trainer log-probs agree to ~1e-6, tested).
 */
export function decodeAttention(
  out: usize, q: usize, k: usize, v: usize, T: i32, NH: i32, NKV: i32, hd: i32, h0: i32, h1: i32, scores: usize,
): void {
  const group = NH / NKV;
  const ld = NKV * hd;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hd));
  for (let h = h0; h < h1; h++) {
    const qo = q + (<usize>(h * hd) << 2);
    const kvo = (h / group) * hd;
    let mx: f32 = -Infinity;
    for (let s = 0; s < T; s++) {
      const d = dot(qo, k + (<usize>(s * ld + kvo) << 2), hd) * scale;
      store<f32>(scores + (<usize>s << 2), d);
      if (d > mx) mx = d;
    }
    let sum: f32 = 0;
    for (let s = 0; s < T; s++) {
      const e = Mathf.exp(load<f32>(scores + (<usize>s << 2)) - mx);
      store<f32>(scores + (<usize>s << 2), e);
      sum += e;
    }
    const inv: f32 = 1 / sum;
    const oo = out + (<usize>(h * hd) << 2);
    zeroFloats(oo, hd);
    for (let s = 0; s < T; s++) {
      axpy(oo, load<f32>(scores + (<usize>s << 2)) * inv, v + (<usize>(s * ld + kvo) << 2), hd);
    }
  }
}
